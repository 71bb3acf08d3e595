"""Metrics of App. E.4: the definitions (:mod:`.definitions`), threshold rules (:mod:`.thresholds`),
every metric of one prediction (:mod:`.evaluation`) and the evaluate job (:mod:`.evaluate_run`)."""
