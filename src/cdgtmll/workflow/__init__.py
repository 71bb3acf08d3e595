"""What the Snakemake workflow runs in its own process: the environment its jobs inherit
(:mod:`cdgtmll.workflow.env`), the scheduler workaround (:mod:`cdgtmll.workflow.scheduler`) and
the progress line of the logger plugin (:mod:`cdgtmll.workflow.eta`)."""
