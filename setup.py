"""Package layout: the repository keeps plugins/ and pipelines/ beside kfmt/, but they install
inside the kfmt namespace (kfmt.default_plugins, kfmt.pipelines): no top-level "plugins" or
"pipelines" package may land in site-packages. Everything else lives in pyproject.toml."""
from setuptools import find_packages, setup

MAPPED = {"kfmt.default_plugins": "plugins", "kfmt.pipelines": "pipelines"}


def packages_under(prefix: str, directory: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(directory)]


packages = find_packages(include=["kfmt", "kfmt.*"])
for prefix, directory in MAPPED.items():
    packages += packages_under(prefix, directory)

setup(packages=packages, package_dir={"kfmt": "kfmt", **MAPPED})
