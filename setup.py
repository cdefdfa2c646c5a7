"""Build rmq's Cython hot paths (rmq/_fast/*.pyx).

Every extension has a pure-Python twin, so the package still works when the
extensions cannot be built; set RMQ_BUILD_NO_EXT=1 to skip them on purpose.
"""

import glob
import os

from setuptools import setup


def _extensions():
    if os.environ.get("RMQ_BUILD_NO_EXT") == "1":
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    exts = []
    for pyx in sorted(glob.glob(os.path.join("rmq", "_fast", "*.pyx"))):
        name = "rmq._fast." + os.path.splitext(os.path.basename(pyx))[0]
        exts.append(
            Extension(
                name,
                [pyx],
                extra_compile_args=["-O3"],
                libraries=["z"],
            )
        )
    return cythonize(
        exts,
        language_level=3,
        compiler_directives={"embedsignature": True},
        quiet=True,
    )


setup(ext_modules=_extensions())
