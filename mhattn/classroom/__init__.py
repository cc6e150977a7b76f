"""Grading a class: many hand-ins at once, a gradebook, a class summary, and a Gradescope autograder.

This layer sits above the one-hand-in grader (:mod:`mhattn.grade`) and only calls it: a hand-in is
unpacked safely (:mod:`~mhattn.classroom.handins`), graded with its own seed derived from the class seed
and the student id, and written out (:mod:`~mhattn.classroom.gradebook`, :mod:`~mhattn.classroom.summary`).
:mod:`~mhattn.classroom.gradescope` builds the zip Gradescope runs and grades one upload there.
"""

from mhattn.classroom.gradebook import grade_class
from mhattn.classroom.handins import HandinError, student_seed, unpack

__all__ = ["HandinError", "grade_class", "student_seed", "unpack"]
