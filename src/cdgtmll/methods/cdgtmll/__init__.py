"""CD-GTMLL (Sections 3-4, App. E.1): the model (:mod:`.model`), the label-space partition
(:mod:`.partition`) and the per-pair terms of Eq. 6 (:mod:`.terms`)."""
