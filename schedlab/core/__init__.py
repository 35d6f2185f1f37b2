"""The ground floor: the paper's vocabulary that every stage shares.

    schedlab.core.testbed  run result, run failure, the testbed protocol
    schedlab.core.files    writing a file atomically (only where the user named an output)
    schedlab.core.inputs   reading an input: a bounded regular file, YAML 1.2, limits
    schedlab.core.settings what a study's testbed options and simulator settings may be

Just above it: schedlab.config (study, variant, point, definitions: loading and checking)
and schedlab.plan (the run order of a study and the seeds of its runs). Nothing here
imports from a stage above (config, build, testbeds, run, store, stats, report).
"""
