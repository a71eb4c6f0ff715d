# The README's two commands:
#   make course   set up .venv and start JupyterLab on notebooks/
#   make test     set up .venv with the developer tools and run the linter and the test suite
PYTHON ?= python3
VENV ?= .venv
# torch is installed first, pinned, so that pip never picks a build on its own. On a Linux
# machine without a GPU, the CPU-only build is much smaller:
#   make course TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
BIN := $(VENV)/bin
# JupyterLab refuses to run as root unless told to; in a container, root is the usual user.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test lint release distribution grade
course: $(VENV)/.installed-lab
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

test: $(VENV)/.installed-dev lint
	$(BIN)/pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# Instructors: regenerate the student release notebooks/ from solutions/ (see the README).
release: $(VENV)/.installed-dev
	$(BIN)/python -m autograder.release

# Instructors: what a graded class's students receive (no solutions, no hidden tests).
#   make distribution DEST=../course-for-students
distribution: $(VENV)/.installed-dev
	$(BIN)/python -m autograder.distribution $(DEST)

# Instructors: grade every student's submission of an assignment, JOBS at a time.
#   make grade ASSIGNMENT=02-collectives JOBS=2
JOBS ?= 1
grade: $(VENV)/.installed-dev
	$(BIN)/python -m autograder.grade_class $(ASSIGNMENT) --jobs $(JOBS)

$(VENV)/.installed-%: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e ".[$*]"
	touch $@
