"""Build fairseq-fixed's two Cython extensions in place, against the running interpreter's numpy.

    python build_fairseq_ext.py FAIRSEQ_SOURCE_DIR      (the unpacked fairseq_fixed-0.12.3.1 sdist)

For a machine whose Python or numpy differs from the wheel's (section 6b: Python 3.12, numpy 2).
"""

import os
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

os.chdir(sys.argv.pop(1))
EXTENSIONS = [Extension(f"fairseq.data.{name}", [f"fairseq/data/{name}.pyx"], include_dirs=[numpy.get_include()],
                        language="c++", extra_compile_args=["-std=c++11", "-O3"])
              for name in ("data_utils_fast", "token_block_utils_fast")]
setup(name="fairseq-extensions", ext_modules=cythonize(EXTENSIONS, language_level=3),
      script_args=["build_ext", "--inplace", "-q"])
