# AIP-Speech — `make all` runs the pipeline headless; `make test` runs the tests.
# Variables: PROFILE=demo|paper|custom, MODEL=…, MODELS=my_models.yaml (your own recognisers:
# docs/AUDIT_YOUR_MODEL.md), TASK=…, SHARD=i/n (stage 7: one shard of n, then
# `make merge`), SUITE=background|competing_speech|channel|comma list|all (condition families of
# stages 1, 5, 7 and 8; default background), SEED=n (the seed of stages 2, 3, 6 and 9, not the mixing:
# PARAMS='-p seed_offset n' moves the manifests' seeds, stage 5), PARAMS='-p name value …' (extra
# papermill parameters), plus for custom (all five required): SPEECH_DIR TEXTS KWS_DIR KWS_LABELS
# BACKGROUNDS_DIR (and DISTRACTORS_DIR DISTRACTOR_TEXTS for competing_speech, also paper), for paper: MIRROR.
# Paths may contain spaces (DATA_ROOT="/my data", a clone in "~/My Projects"): every recipe quotes them;
# relative paths are taken from the folder make runs in.
SHELL := /bin/bash
PROFILE ?= demo
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DATA_ROOT ?= $(CURDIR)/data
# A relative path given to make (DATA_ROOT=out, SPEECH_DIR=my/speech) is taken from the folder make
# runs in, as `make validate` and `make stamps` take it, not from notebooks/ where the kernels run.
# Absolute and ~ paths are kept (aiplib expands ~); the test is on the first word, so spaces are fine.
from_here = $(if $(filter /% ~%,$(firstword $(1))),$(1),$(CURDIR)/$(1))
override DATA_ROOT := $(call from_here,$(DATA_ROOT))
OUT := $(DATA_ROOT)/$(PROFILE)/executed
STAGES := 01_download_data 02_build_item_banks 03_curate_backgrounds 04_extract_descriptors \
          05_build_manifests 06_manipulation_checks 07_run_inference 08_score_outputs \
          09_make_figures 10_listen_and_explore
STAMP := $(VENV)/.installed
NOTEBOOKS ?= notebooks
PROFILES := demo paper custom
ifeq ($(filter $(PROFILE),$(PROFILES)),)
$(error PROFILE must be one of: $(PROFILES) (got '$(PROFILE)'))
endif

# Make variables passed on to the notebooks as papermill parameters (only when set); scripts/run_stage.sh
# hands each notebook only those its parameters cell declares (aiplib/core/papermill_args.py).
PM_ARGS := -p profile $(PROFILE)
ifdef MODEL
PM_ARGS += -p model $(MODEL)
endif
ifdef TASK
PM_ARGS += -p task $(TASK)
endif
ifdef SEED
PM_ARGS += -p seed $(SEED)
endif
ifdef SHARD
PM_ARGS += -r shard "$(SHARD)"
endif
SUITE ?=
ifneq ($(strip $(SUITE)),)
PM_ARGS += -r suite "$(SUITE)"
endif
ifdef SPEECH_DIR
PM_ARGS += -r speech_dir "$(call from_here,$(SPEECH_DIR))"
endif
ifdef TEXTS
PM_ARGS += -r texts "$(call from_here,$(TEXTS))"
endif
ifdef KWS_DIR
PM_ARGS += -r kws_dir "$(call from_here,$(KWS_DIR))"
endif
ifdef KWS_LABELS
PM_ARGS += -r kws_labels "$(call from_here,$(KWS_LABELS))"
endif
ifdef BACKGROUNDS_DIR
PM_ARGS += -r backgrounds_dir "$(call from_here,$(BACKGROUNDS_DIR))"
endif
ifdef KEYWORDS
PM_ARGS += -r keywords "$(KEYWORDS)"
endif
ifdef DISTRACTORS_DIR
PM_ARGS += -r distractors_dir "$(call from_here,$(DISTRACTORS_DIR))"
endif
ifdef DISTRACTOR_TEXTS
PM_ARGS += -r distractor_texts "$(call from_here,$(DISTRACTOR_TEXTS))"
endif
ifdef MIRROR
export AIP_MIRROR := $(MIRROR)
endif
# MODELS=my_models.yaml: your own recognisers (registry.yaml's format, merged over it;
# docs/AUDIT_YOUR_MODEL.md), read by stages 6-10 and preflight as $AIP_MODELS; without it
# $(DATA_ROOT)/models.yaml is read when it exists.
ifdef MODELS
export AIP_MODELS := $(call from_here,$(MODELS))
endif
PM_ARGS += $(PARAMS)

.PHONY: preflight stage-checked output-filter stamps sync-notebooks lock lock-paper all setup validate run-stage report merge criteria test test-quick unit lint lab clean bench verify fingerprint models help $(STAGES) $(addprefix stage-,$(STAGES))

# One writer per data folder (aiplib/core/lock.py): `make all`, each stage and `make merge` hold the lock of
# $(DATA_ROOT)/$(PROFILE); a second run stops with one line naming the holder, or waits LOCK_WAIT=<s>
# seconds. Stage 7 with SHARD=i/n takes the shared shard mode: shards run together, nothing else.
ifdef LOCK_WAIT
export AIP_LOCK_WAIT := $(LOCK_WAIT)
endif
WITH_LOCK = $(PY) -m aiplib.core.lock run "$(DATA_ROOT)/$(PROFILE)" --command
# A stage whose notebook, aiplib source, parameters, environment and files read and written are
# unchanged since its last success (its record, $(OUT)/NN_*.stamp.json, aiplib/core/stage_records.py)
# is skipped with one line; FORCE=1 runs every stage anyway. A first run without records runs all.
RECORDS = $(PY) -m aiplib.core.stage_records --notebooks "$(NOTEBOOKS)" --out "$(OUT)" $(if $(FORCE),--force)
REPORT := $(DATA_ROOT)/$(PROFILE)/results/report.html
all: setup preflight validate
	@$(WITH_LOCK) "make all PROFILE=$(PROFILE)" -- bash -c 'for s in $(STAGES); do \
	  if [ "$${next-__}" = __ ]; then next=$$($(RECORDS) next --after "$${after-}" -- $(PM_ARGS)) || exit 1; fi; \
	  [ "$$s" = "$$next" ] || continue; \
	  $(MAKE) --no-print-directory run-stage STAGE=$$s CHECKED=1 || exit 1; after=$$s; next=__; done; \
	  if [ ! -f "$(REPORT)" ] || [ "$(OUT)/09_make_figures.ipynb" -nt "$(REPORT)" ]; then $(MAKE) --no-print-directory report; fi'
	@echo "make all: done — report: $(REPORT)"

# Before stage 1 (seconds): MODEL, MODELS (the models file), TASK, SUITE and SHARD, with the
# messages stage 7 would give after stages 1-6 (aiplib/inference/preflight.py).
preflight: setup
	@AIP_DATA_ROOT="$(DATA_ROOT)" $(PY) -m aiplib.inference.preflight --model "$(MODEL)" --task "$(TASK)" --suite "$(SUITE)" --shard "$(SHARD)"

# `make help`: the lines starting with "#>" (one per target), then the comment at the top (the variables).
#> all             every stage 01-10 (a stage whose inputs, parameters and code are unchanged is skipped; FORCE=1 runs all), then the report
#> 01 … 10         one stage, after the earlier stages never run here or whose record is stale (also stage-01 or stage-01_download_data); stage 09 renders the report too
#> preflight       check MODEL, MODELS, TASK, SUITE and SHARD in seconds (`make all` does it before stage 1)
#> report          results/report.html again, from the newer of the executed 09 and a JupyterLab-run notebooks/09
#> score           stages 08-09 on a folder of inference files written elsewhere (INFERENCE_DIR=…)
#> remove-model    delete MODEL=…'s inference results of every condition family, then re-run stages 08-09
#> merge           fold stage 7's shard files (SHARD=i/n runs) into one file per model and task
#> criteria        check the last run against CRITERIA=criteria.json (and PREVIOUS=… results)
#> stamps          list the stages the next `make all` would run, and why (runs nothing)
#> verify          compare the finished demo run with benchmarks/demo_fingerprint.json; name the first difference
#> fingerprint     write benchmarks/demo_fingerprint.json from the finished demo run (then commit it)
#> models          every model (registry + MODELS=/DATA_ROOT/models.yaml): needs, ready here; tasks, suites, profiles
#> lab             JupyterLab at the project root (notebooks, records, report); LAB_ARGS='--no-browser …' its flags
#> test            the unit tests, then every notebook under nbval at smoke size (scratch data root)
#> unit            the unit tests without the slow and browser ones
#> test-quick      the unit tests for the edit loop, with the 5 slowest; CI runs `make test`
#> lint            ruff and the plain-code checks (tests/test_code_style.py)
#> bench           the benchmarks (mixing, inference, batching, OpenAI concurrency, encoder window, `make all`'s stage times)
#> setup           .venv with the pinned packages (constraints.txt) and the Debian packages
#> output-filter   configure git to strip notebook outputs (nbstripout; setup runs it)
#> validate        check the custom profile's folders before any work (PROFILE=custom)
#> run-stage       run STAGE=NN_name through papermill unless up to date (FORCE=1: anyway)
#> stage-checked   STAGE=NN_name after the earlier stages never run here or whose record is stale (what `make NN` calls)
#> sync-notebooks  bring each notebook and its .py pair in step (jupytext)
#> lock            re-resolve requirements.lock and constraints.txt after a dependency change
#> lock-paper      the same for the paper extra (requirements-paper.lock, constraints-paper.txt)
#> clean           delete the generated data of PROFILE (DATA_ROOT/PROFILE), under the folder's lock
#> help            this list
help:
	@echo "Targets (make TARGET [VARIABLE=value …]):"
	@sed -n 's/^#> /  /p' Makefile
	@sed -n '2,/^[^#]/s/^# //p' Makefile

setup: $(STAMP)

# Python packages: every version comes from constraints.txt (Linux x86_64, Python 3.11, torch
# 2.13.0+cpu). Where no CPU torch wheel is on pip's own indexes, add PyTorch's CPU index, e.g.
#   make setup PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"
LOCK := constraints.txt
PIP_ARGS ?=
$(STAMP): pyproject.toml $(LOCK) binder/apt.txt scripts/apt-test.txt scripts/install_debian.sh
	bash scripts/install_debian.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIP_ARGS) -c $(LOCK) -e ".[notebooks,test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (AIP-Speech)" >/dev/null
	@$(MAKE) --no-print-directory output-filter
	touch $(STAMP)

# Output filter (per clone: git config is not versioned; .gitattributes names the filter for *.ipynb):
# nbstripout cleans every notebook on its way into git (`git add`, `git diff`, `git status`), so
# outputs, execution counts and widget state that a JupyterLab session writes into notebooks/ stay
# in the working copy only. Cell ids are kept (--keep-id): the committed notebooks are the filter's
# fixed points. `make setup` runs this once; outside a git clone (an archive) it does nothing.
NBSTRIPOUT_PY ?= $(CURDIR)/$(VENV)/bin/python
output-filter:
	@if git -C "$(CURDIR)" rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git -C "$(CURDIR)" config filter.nbstripout.clean '"$(NBSTRIPOUT_PY)" -m nbstripout --keep-id' && \
	  git -C "$(CURDIR)" config filter.nbstripout.smudge cat && \
	  git -C "$(CURDIR)" config filter.nbstripout.required true && \
	  git -C "$(CURDIR)" config diff.ipynb.textconv '"$(NBSTRIPOUT_PY)" -m nbstripout --keep-id -t' && \
	  echo "output filter: git strips outputs from *.ipynb (nbstripout, .gitattributes)"; \
	else echo "output filter: not a git clone, nothing to configure"; fi

# Custom profile: check the user's folders before any work (lists every problem; exits 1 if fatal).
validate: setup
ifeq ($(PROFILE),custom)
	$(PY) -m aiplib.sources.corpora.custom --speech-dir "$(SPEECH_DIR)" --texts "$(TEXTS)" --kws-dir "$(KWS_DIR)" \
	  --kws-labels "$(KWS_LABELS)" --backgrounds-dir "$(BACKGROUNDS_DIR)" $(if $(KEYWORDS),--keywords "$(KEYWORDS)")
endif

# scripts/run_stage.sh runs $(NOTEBOOKS)/$(STAGE).ipynb with papermill. The executed copy replaces the
# previous one only when the stage succeeds; a failed run is kept beside it as NN_*.failed.ipynb, so a
# failed or mistyped re-run never hides the last good record. A failure ends with its reason (the
# cell and its error, or one line when the kernel died); tracebacks stay in $(OUT)/NN_*.log.
# Unless CHECKED=1 (make all checked it), FORCE=1 or a stage-7 shard, a stage that is up to date is
# skipped (one line).
SKIP_IF_UP_TO_DATE = $(if $(or $(CHECKED),$(FORCE),$(and $(SHARD),$(filter 07_%,$(STAGE)))),,\
  s=$$($(RECORDS) next --only "$(STAGE)" -- $(PM_ARGS)) || exit 1; [ -n "$$s" ] || exit 0;)
run-stage:
	@$(SKIP_IF_UP_TO_DATE) AIP_STAGE_RECORD=1 AIP_PROFILE="$(PROFILE)" AIP_DATA_ROOT="$(DATA_ROOT)" $(if $(and $(SHARD),$(filter 07_%,$(STAGE))),AIP_RUN_TAG=".shard-$(subst /,-of-,$(SHARD))") PAPERMILL="$(VENV)/bin/papermill" FILTER_PYTHON="$(PY)" \
	  bash scripts/run_stage.sh "$(STAGE)" "$(NOTEBOOKS)" "$(OUT)" $(PM_ARGS)
ifeq ($(STAGE),09_make_figures)
	@if [ ! -f "$(REPORT)" ] || [ "$(OUT)/09_make_figures.ipynb" -nt "$(REPORT)" ] || [ -n "$(FORCE)" ]; then \
	  $(MAKE) --no-print-directory report; fi
endif

# `make NN`: first the earlier stages whose record is stale (an edited input recording re-runs stage
# 1 before stage 2; a stage that never ran in this data folder runs; one without a record that left
# files is left as it is), then stage NN unless up to date.
stage-checked:
	@$(if $(and $(SHARD),$(filter 07_%,$(STAGE))),,after=; while :; do \
	  s=$$($(RECORDS) next --before "$(STAGE)" --after "$$after" -- $(PM_ARGS)) || exit 1; [ -n "$$s" ] || break; \
	  $(MAKE) --no-print-directory run-stage STAGE=$$s CHECKED=1 || exit 1; after=$$s; done)
	@$(MAKE) --no-print-directory run-stage STAGE=$(STAGE)

# results/report.html (one self-contained page) and report.md, rendered from the newer of the executed
# notebook 09 and notebooks/09_make_figures.ipynb run and saved in JupyterLab (with its outputs).
report: setup
	@$(PY) -m aiplib.analysis.report --profile "$(PROFILE)" --data-root "$(DATA_ROOT)" \
	  --render "$(OUT)/09_make_figures.ipynb" "$(NOTEBOOKS)/09_make_figures.ipynb"

# `make 03` or `make stage-03_curate_backgrounds` or `make stage-03` runs one stage.
$(foreach s,$(STAGES),$(eval $(word 1,$(subst _, ,$(s))): setup $(if $(filter 01_%,$(s)),validate) ; @$$(MAKE) --no-print-directory stage-checked STAGE=$(s)))
$(foreach s,$(STAGES),$(eval stage-$(word 1,$(subst _, ,$(s))): setup ; @$$(MAKE) --no-print-directory stage-checked STAGE=$(s)))
$(foreach s,$(STAGES),$(eval stage-$(s): setup ; @$$(MAKE) --no-print-directory stage-checked STAGE=$(s)))
# `make 7`: stages have two digits; one line saying so instead of make's "No rule to make target".
ONE_DIGIT := 1 2 3 4 5 6 7 8 9
.PHONY: $(ONE_DIGIT)
$(foreach n,$(ONE_DIGIT),$(eval $(n): ; @echo "make: no stage '$(n)': stages have two digits, e.g. make 0$(n)" >&2; exit 2))

# `make merge`: fold stage 7's shard files (SHARD=i/n, a Slurm job array: scripts/slurm/stage7.sbatch)
# into inference/<model>/<task>.jsonl (and inference/<family>/<model>/… of the other condition
# families); refuses two different answers for one stimulus and a shard still running. Stage 8 does
# the same before it scores.
merge: setup
	@$(WITH_LOCK) "make merge PROFILE=$(PROFILE)" -- bash -c '$(PY) -m aiplib.inference.shards "$(DATA_ROOT)/$(PROFILE)/inference" && \
	  for cf in competing_speech channel; do d="$(DATA_ROOT)/$(PROFILE)/inference/$$cf"; \
	  if [ -d "$$d" ]; then $(PY) -m aiplib.inference.shards "$$d" || exit 1; fi; done'

# Tests: unit tests, then every notebook under nbval with the smoke-size parameters ($AIP_SMOKE=1)
# in a scratch data root, so the test run never touches data/.
TEST_DATA := $(CURDIR)/build/test-data
test: setup
	rm -rf "$(TEST_DATA)"
	AIP_SMOKE=1 AIP_DATA_ROOT="$(TEST_DATA)" $(VENV)/bin/pytest -q -rs -p no:cacheprovider --durations=15 tests
	AIP_SMOKE=1 AIP_DATA_ROOT="$(TEST_DATA)" AIP_PROFILE=demo $(VENV)/bin/pytest -q -rs -p no:cacheprovider \
	  --nbval-lax --nbval-current-env notebooks/

# `make lint`: ruff (pyproject.toml: line length 100, McCabe complexity 12) and the plain-code checks
# of tests/test_code_style.py (radon complexity <= 15, task families asked through their spec, ...).
lint: setup
	$(VENV)/bin/ruff check aiplib
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/test_code_style.py tests/test_architecture.py

unit: setup
	AIP_SMOKE=1 AIP_DATA_ROOT="$(TEST_DATA)" $(VENV)/bin/pytest -q -p no:cacheprovider -rs -m "not slow and not browser" tests

# `make test-quick`: the edit loop's run, the unit tests only (no slow, no browser test), with the 5
# slowest named. It is not what CI runs: `make test` is.
test-quick: setup
	AIP_SMOKE=1 AIP_DATA_ROOT="$(TEST_DATA)" $(VENV)/bin/pytest -q -p no:cacheprovider -rs --durations=5 \
	  -m "not slow and not browser" tests

# `make criteria CRITERIA=criteria.json [PREVIOUS=old/results]`: check the last run against thresholds
# and the previous run. GNU make reports any failure as status 2; for the exact status 3 (criteria
# failed or a condition got worse) call the command itself in CI:
#   .venv/bin/python -m aiplib.analysis.report --profile demo --criteria criteria.json --check-only
CRITERIA ?= criteria.json
criteria: setup
	@test -f "$(CRITERIA)" || { echo "make criteria: $(CRITERIA) not found (set CRITERIA=...; format in aiplib/analysis/criteria.py)" >&2; exit 1; }
	$(PY) -m aiplib.analysis.report --profile "$(PROFILE)" --data-root "$(DATA_ROOT)" --criteria "$(CRITERIA)" \
	  $(if $(PREVIOUS),--previous "$(PREVIOUS)") $(if $(MIN_DIFF),--min-diff $(MIN_DIFF))

# `make lock` re-resolves pyproject.toml (extras notebooks + test) with pip-tools after a dependency
# change: requirements.lock has every pin with its SHA-256; constraints.txt is the same pins without
# hashes (pip refuses an editable install beside hashed constraints). Pins already in the lock are
# kept; `make lock LOCK_ARGS=--upgrade` moves them to the newest allowed.
lock: setup
	$(PY) -m pip install -q pip-tools
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile -q --extra notebooks --extra test --generate-hashes --strip-extras \
	  --unsafe-package aiplib --unsafe-package pip --no-emit-index-url --no-emit-find-links \
	  $(LOCK_ARGS) --output-file requirements.lock pyproject.toml
	sed -e '/^ *--hash=/d' -e 's/ \\$$//' requirements.lock > $(LOCK)

# The paper extra (datasets<4, for Common Voice 17's loading script) caps fsspec below the main pin:
# its lock starts from requirements.lock, so pip-compile keeps every other pin and adds the extra's.
lock-paper: setup
	$(PY) -m pip install -q pip-tools
	cp requirements.lock requirements-paper.lock
	CUSTOM_COMPILE_COMMAND="make lock-paper" $(VENV)/bin/pip-compile -q --extra notebooks --extra test --extra paper \
	  --generate-hashes --strip-extras --unsafe-package aiplib --unsafe-package pip --no-emit-index-url \
	  --no-emit-find-links $(LOCK_ARGS) --output-file requirements-paper.lock pyproject.toml
	sed -e '/^ *--hash=/d' -e 's/ \\$$//' requirements-paper.lock > constraints-paper.txt

# The demo fingerprint (aiplib/analysis/fingerprint.py, docs/BENCHMARKS.md): `make verify` compares the
# finished demo run in $(DATA_ROOT)/demo with $(FINGERPRINT) and names the first difference and its kind
# (inputs, decoding, scoring); exit 1 when they differ, 2 when the run is not finished. `make fingerprint`
# writes $(FINGERPRINT) from the run (after a full `make all`; commit the file). Demo profile only.
FINGERPRINT ?= benchmarks/demo_fingerprint.json
FINGERPRINT_CMD = $(PY) -m aiplib.analysis.fingerprint --profile "$(PROFILE)" --data-root "$(DATA_ROOT)" \
  --fingerprint "$(call from_here,$(FINGERPRINT))"
verify: setup
ifeq ($(PROFILE),demo)
	@$(FINGERPRINT_CMD) verify
else
	@echo "make verify: the fingerprint is the demo profile's; PROFILE=$(PROFILE) has none to compare with"
endif

fingerprint: setup
ifeq ($(PROFILE),demo)
	@$(FINGERPRINT_CMD) write
else
	@echo "make fingerprint: only the demo profile has a committed fingerprint; PROFILE=$(PROFILE) gets none"
endif

# `make all` skips a stage whose record ($(OUT)/NN_*.stamp.json, aiplib/core/stage_records.py) matches
# the notebook, aiplib, the parameters (every variable `make all` passes), the environment and the
# files it reads and wrote; inside a stage, stages 1-2 and the family manifests keep a stamp
# (aiplib/core/stamps.py), stage 4 and stage 7 keep their work by content. `make stamps` lists the
# stages the next `make all` of $(PROFILE) with the same variables would run and why, a file added to
# or edited in the custom folders included (runs nothing).
stamps: setup
	@$(RECORDS) status -- $(PM_ARGS) || true

# Notebooks are paired with percent-format .py scripts (jupytext.toml): bring each pair in step.
sync-notebooks: setup
	$(VENV)/bin/jupytext --sync "$(NOTEBOOKS)"/[0-9][0-9]_*.ipynb

# JupyterLab at the project root (file browser opened at notebooks/): notebooks/, the executed records
# data/<profile>/executed/ and data/<profile>/results/report.html are all under it. Notebooks open
# through jupytext's contents manager (the jupyterlab_jupytext server extension that jupytext
# installs, reading jupytext.toml at the root), so a save updates the .ipynb and its .py together.
# LAB_ARGS passes JupyterLab's own flags, e.g. LAB_ARGS='--no-browser --ip 127.0.0.1 --port 8899';
# as root (a container, a cloud VM) --allow-root is added, which JupyterLab otherwise demands.
LAB_ARGS ?=
LAB_ROOT_FLAG = $(if $(filter 0,$(shell id -u)),--allow-root)
lab: setup
	@echo "JupyterLab at $(CURDIR): $(NOTEBOOKS)/, executed records in $(OUT), report $(DATA_ROOT)/$(PROFILE)/results/report.html"
	@case "$(DATA_ROOT)/" in "$(CURDIR)"/*|[!/]*) ;; *) echo "note: DATA_ROOT is outside the project folder, so JupyterLab's file browser cannot show it";; esac
	AIP_PROFILE="$(PROFILE)" AIP_DATA_ROOT="$(DATA_ROOT)" $(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.default_url="/lab/tree/$(NOTEBOOKS)" $(LAB_ROOT_FLAG) $(LAB_ARGS)

# bench_make_all.py reads the stage times of the last `make all` (add --run to time a fresh one);
# bench_window.py needs the workspace's manifests (stages 1-5) and decodes ~300 stimuli twice per window.
bench: setup
	$(PY) benchmarks/bench_mixing.py
	$(PY) benchmarks/bench_inference.py
	$(PY) benchmarks/bench_batching.py
	$(PY) benchmarks/bench_openai_concurrency.py
	-$(PY) benchmarks/bench_window.py --profile "$(PROFILE)" --data-root "$(DATA_ROOT)"
	$(PY) benchmarks/bench_make_all.py --profile "$(PROFILE)" --data-root "$(DATA_ROOT)"

# `make clean` takes the data folder's lock (as `make all`): while a run writes the folder it stops with
# the one line naming that run, instead of deleting the folder under it (without .venv: no lock).
clean:
	@$(if $(wildcard $(PY)),$(WITH_LOCK) "make clean PROFILE=$(PROFILE)" --) rm -rf -- "$(DATA_ROOT)/$(PROFILE)"
	@echo "removed the generated data of profile $(PROFILE): '$(DATA_ROOT)/$(PROFILE)'"

# `make models`: every model of the registry and of your models file (MODELS=, else
# $(DATA_ROOT)/models.yaml) with its backend, what it needs (CUDA GPU, server, program, weights) and
# whether it is ready here, then the tasks, suites and profiles (aiplib/inference/models/catalog.py).
.PHONY: models
models: setup
	@AIP_DATA_ROOT="$(DATA_ROOT)" $(PY) -m aiplib.inference.models.catalog

# `make remove-model MODEL=<id>`: delete that model's stage-7 results in every condition family
# (inference/<id>/ with its shard files; aiplib/inference/remove.py), then re-run stages 8-9, so
# the report no longer shows it (with no model left, results/ is removed instead).
.PHONY: remove-model
remove-model: setup
	@test -n "$(MODEL)" || { echo "make remove-model: set MODEL=<model id>" >&2; exit 1; }
	@$(WITH_LOCK) "make remove-model PROFILE=$(PROFILE)" -- $(PY) -m aiplib.inference.remove \
	  --profile "$(PROFILE)" --data-root "$(DATA_ROOT)" --model "$(MODEL)"
	@if compgen -G "$(DATA_ROOT)/$(PROFILE)/inference/*/*.jsonl" >/dev/null; then \
	  $(MAKE) --no-print-directory run-stage STAGE=08_score_outputs && \
	  $(MAKE) --no-print-directory run-stage STAGE=09_make_figures; fi

# `make score INFERENCE_DIR=path/to/inference [MANIFESTS_DIR=path/to/manifests] [PROFILE=paper]`:
# score a folder of <model>/<task>.jsonl written elsewhere (e.g. the authors' published files), no
# GPU: stages 08 and 09 only, results under $(DATA_ROOT)/$(PROFILE)/results. MANIFESTS_DIR reaches
# both stages; without it the inference rows' own manifest columns are used.
SCORE_MANIFESTS = $(if $(MANIFESTS_DIR),-r manifests_dir "$(call from_here,$(MANIFESTS_DIR))")
score: setup
	@test -n "$(INFERENCE_DIR)" || { echo "make score: set INFERENCE_DIR=<folder of <model>/<task>.jsonl>" >&2; exit 1; }
	@$(MAKE) --no-print-directory run-stage STAGE=08_score_outputs \
	  PARAMS='$(PARAMS) -r inference_dir "$(call from_here,$(INFERENCE_DIR))" $(SCORE_MANIFESTS)'
	@$(MAKE) --no-print-directory run-stage STAGE=09_make_figures PARAMS='$(PARAMS) $(SCORE_MANIFESTS)'
