"""The lab testbed's pieces: the inventory (config/lab.yaml), BMC power control
over IPMI, and the host lifecycle driver (install, one-shot boot, verify, run,
recover a hung host, quarantine). `schedlab.testbeds.lab` puts them together."""
