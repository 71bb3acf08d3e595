"""Lineage: what produced an artifact (:mod:`.provenance`) and the audit that traces a table cell
or figure back to its inputs (:mod:`.audit`)."""
