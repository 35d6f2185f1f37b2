"""The ground floor: the paper's vocabulary that every stage shares.

    schedlab.config        study, variant, point, definitions (loading and checking)
    schedlab.core.testbed  run result, run failure, the testbed protocol
    schedlab.core.plan     the run order of a study and the seeds of its runs
    schedlab.core.files    writing a file atomically

Nothing here imports from a stage above (build, testbeds, run, store, stats, report).
"""
