"""The paper's tables: runs collected (:mod:`.collect`), laid out (:mod:`.layout`), footnoted
(:mod:`.footnotes`) and written (:mod:`.render`, :mod:`.html`); the job is :mod:`.build`."""
