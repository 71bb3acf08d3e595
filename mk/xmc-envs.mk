# External XMC libraries, each in a virtual environment of its own under .venv/xmc/, built
# from its own pinned lock (exact versions and sha256 hashes of every package, installed
# with --no-deps --require-hashes; nothing else is installed):
#   .venv/xmc/pecos          requirements-pecos.lock          XR-Linear (libpecos 1.2.8 needs numpy < 2, scipy < 1.14)
#   .venv/xmc/napkinxc       requirements-napkinxc.lock       napkinXC-PLT (reference row, not in the paper)
#   .venv/xmc/libmultilabel  requirements-libmultilabel.lock  LibMultiLabel-1vsRest (reference row, not in the paper)
# Each method runs its library in a worker process of that environment (src/cdgtmll/external/).
# Nothing builds one behind the user's back: `make xmc-envs` builds all three, `make all` the
# ones its profile's methods need (`cdgtmll envs CONFIG`); a missing one is a "not run: not
# built: run make xmc-envs" row. A lock change re-runs the method's jobs (and needs a rebuild).
# Included from the Makefile; also alone:
#   make -f mk/xmc-envs.mk xmc-envs                  build all three (a failure is recorded, see below)
#   make -f mk/xmc-envs.mk .venv/xmc/pecos/.installed
#   make -f mk/xmc-envs.mk xmc-locks UV=path/to/uv   regenerate the three locks (needs uv and the registry)
# A failed build leaves .venv/xmc/<name>.failed (the lock's sha256, then the log's tail) and
# the log .venv/xmc/<name>.build.log: the tables then show "not run: <why>" for that method
# and the pipeline does not retry that lock; `make xmc-envs` does.
PY ?= python3.11
XMC_ENVS := pecos napkinxc libmultilabel
XMC_DIR := .venv/xmc
# uv when there is one (the project venv's, else on PATH), else pip
# (one $(shell): a path with a space stays one word; it is used quoted)
UV ?= $(shell if [ -x .venv/bin/uv ]; then echo .venv/bin/uv; else command -v uv 2>/dev/null; fi)
# local wheel folders of this machine, when present (uv ignores pip.conf)
XMC_FIND_LINKS := $(foreach d,/opt/wheels /opt/pypi-more/files /opt/pypi/files,$(if $(wildcard $(d)),--find-links $(d)))

.PHONY: xmc-envs xmc-locks
xmc-envs:
	-@for e in $(XMC_ENVS); do rm -f $(XMC_DIR)/$$e.failed; \
	  $(MAKE) --no-print-directory -f mk/xmc-envs.mk $(XMC_DIR)/$$e/.installed || true; done

$(XMC_DIR)/%/.installed: requirements-%.lock mk/build-env.sh
	@mkdir -p $(XMC_DIR)
	flock $(XMC_DIR)/$*.build-lock sh mk/build-env.sh $* $< $(XMC_DIR) "$(PY)" "$(UV)" "$(XMC_FIND_LINKS)"

# Lock inputs. libpecos is resolved without the dependencies of XR-Transformer
# (pecos.xmc.xtransformer: torch, transformers, peft, datasets, sentencepiece): XR-Linear
# (pecos.xmc.xlinear) imports numpy, scipy and scikit-learn only, and the CUDA torch wheel
# alone is about 6 GB. The two peers resolve with the project lock as constraints, so that
# the packages they share with it (numpy, scipy, ...) are the project's versions.
XMC_REQ_pecos := libpecos==1.2.8 numpy<2 scipy<1.14 scikit-learn
XMC_EXCLUDE_pecos := torch transformers peft datasets sentencepiece
XMC_REQ_napkinxc := napkinxc==0.7.2
XMC_REQ_libmultilabel := libmultilabel==0.10.0

xmc-locks:
	@test -n "$(UV)" || { echo "xmc-locks needs uv (UV=path/to/uv)" >&2; exit 1; }
	@for e in $(XMC_ENVS); do \
	  case $$e in pecos) req="$(XMC_REQ_pecos)"; ex="$(XMC_EXCLUDE_pecos)"; c="";; \
	    napkinxc) req="$(XMC_REQ_napkinxc)"; ex=""; c="-c requirements.lock";; \
	    libmultilabel) req="$(XMC_REQ_libmultilabel)"; ex=""; c="-c requirements.lock";; esac; \
	  printf '%s\n' $$req > .lock-$$e.in; printf '%s\n' $$ex > .lock-$$e.ex; \
	  { printf '# Pinned environment of .venv/xmc/%s (mk/xmc-envs.mk): every package with its sha256\n' $$e; \
	    printf '# hashes, installed with --no-deps --require-hashes. Regenerate: make -f mk/xmc-envs.mk xmc-locks\n'; \
	    printf '# inputs: %s' "$$req"; [ -n "$$ex" ] && printf '; excluded: %s' "$$ex"; \
	    [ -n "$$c" ] && printf '; constraints: requirements.lock'; printf '\n'; \
	    "$(UV)" pip compile .lock-$$e.in --excludes .lock-$$e.ex $$c --generate-hashes --python-version 3.11 \
	      --no-header --quiet; } > .lock-$$e.tmp && mv .lock-$$e.tmp requirements-$$e.lock; \
	  rm -f .lock-$$e.in .lock-$$e.ex .lock-$$e.tmp; \
	done
