"""nbgrader's configuration for this course (loaded by the repository root's nbgrader_config.py).

The course directory is the repository: instructors' source notebooks are in solutions/, the
student release nbgrader makes from them is notebooks/, and nbgrader's runtime folders
(submitted/, autograded/, feedback/) and its gradebook (gradebook.db) sit beside them,
ignored by git. For a course with several graders, point CourseDirectory.db_url at a server
database instead of the SQLite file.
"""

c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "distributed-training"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"

# What replaces a solution in the student release.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# A cell that runs longer than this is interrupted and graded as failed, and grading goes on:
# one stuck submission cannot stop a class's grading. (launch reports its own hangs much sooner.)
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# Before the first submission, one kernel started as submissions' are must import the course
# being graded, or nothing is graded (grading/preflight.py).
c.Autograde.exporter_class = "grading.preflight.CheckedExporter"

# A test cell fails by raising, not by writing to stderr: a correct answer that warns keeps its
# points; one after code that tampers with what grading relies on fails, and is logged. Feedback
# shows which tests failed and their messages, never the hidden tests' code. (All three are in
# grading/preprocessors.py.)
c.Autograde.autograde_preprocessors = [
    "grading.execute.SandboxedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "grading.preprocessors.ScoreErrorsNotStderr",
    "grading.preprocessors.FlagTampering",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "grading.preprocessors.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
