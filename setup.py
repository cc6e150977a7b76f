"""Build step for the course materials; every other setting is in pyproject.toml.

``build_py`` also writes ``mhattn/course_materials/`` into the build: the notebooks (.ipynb and .py) and the
exercise stubs rendered from ``exercises_src/`` (answers removed), so that ``mhattn course init DIR`` works
from a wheel. ``solutions/`` and ``exercises_src/`` never enter the wheel. The file list is decided by
``mhattn/course/materials.py``, loaded by path (standard library only: the isolated build has no NumPy).
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class build_py_with_course(build_py):
    def run(self):
        super().run()
        spec = importlib.util.spec_from_file_location("_mhattn_materials", ROOT / "mhattn" / "course" / "materials.py")
        materials = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(materials)
        target = Path(self.build_lib) / "mhattn" / "course_materials"
        for rel, data in materials.collect(ROOT).items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


setup(cmdclass={"build_py": build_py_with_course})
