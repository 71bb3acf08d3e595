"""Study figures of Sec. 5.3-5.4: run data (:mod:`.runs`), method comparisons
(:mod:`.comparison`), multi-player analysis (:mod:`.players`); the job is :mod:`.build`."""
