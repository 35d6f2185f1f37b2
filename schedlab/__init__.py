"""schedlab: reproducible Xen credit1 scheduler studies (build -> testbed -> run -> store -> stats -> report)."""

__version__ = "0.1.0"
