"""Figures from run artefacts: the shared style (:mod:`.style`), the PR figure (:mod:`.pr_curve`)
and the study figures (:mod:`.studies`)."""
