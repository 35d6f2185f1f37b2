"""gather_points (workflow/rules/run.smk): a study's manifest on the sim, from its point
manifests. Run by Snakemake's `script:` directive, which defines `snakemake`."""

from pathlib import Path

from schedlab.run import gather

gather(list(snakemake.input), snakemake.output[0])  # noqa: F821
Path(snakemake.log[0]).write_text(f"{len(snakemake.input)} point manifests\n")  # noqa: F821
