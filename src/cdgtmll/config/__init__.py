"""The pipeline configuration: the JSON schema (:mod:`.schema`), loading and semantic checks
(:mod:`.loader`), plugin import (:mod:`.plugins`) and planning (:mod:`.plan`: run specs, study
jobs, what cannot run)."""
