"""Sphinx configuration of the course site (built by docs/build.sh from a staged copy of docs/).

The notebooks are rendered from their stored outputs (never executed here); math is typeset by a
MathJax 3 copy that build.sh puts under _static/mathjax, so no page asks another host for anything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# build.sh stages the sources elsewhere and says where the repository is; a plain sphinx-build on docs/ works too
ROOT = Path(os.environ.get("MHATTN_ROOT", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(ROOT))

project = "mhattn"
author = "mhattn contributors"
copyright = "mhattn contributors, MIT licence"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]

exclude_patterns = ["_build", "build.sh", "explorer/*.py", "explorer/*.json", "**.ipynb_checkpoints", "README.md"]
root_doc = "index"

# notebooks: shown with the outputs stored in the .ipynb files, never executed when the site is built
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# API reference: the docstrings as written (Google style sections), in source order
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# MathJax 3 served from this site (build.sh copies the npm package's es5/ folder, fonts and TeX extensions included)
mathjax_path = "mathjax/tex-chtml.js"
mathjax3_config = {"tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]]}}

html_theme = "sphinx_book_theme"
html_title = "mhattn: multi-head attention by hand"
html_static_path = ["_static"]
html_css_files = ["explorer.css"]
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
# a default colour mode: without one the theme logs a console error on a first visit
html_context = {"default_mode": "light"}
html_theme_options = {
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "use_source_button": False,
    "use_issues_button": False,
    "use_edit_page_button": False,
    "launch_buttons": {},
    "show_toc_level": 2,
    "home_page_in_toc": True,
}
