"""ament_python package; `pip install -e .[test]` works without ROS (ROS deps live in package.xml)."""
from glob import glob

from setuptools import find_packages, setup

package_name = "liedyn_ros"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "benchmarks"]),
    package_data={package_name: ["robots/*.urdf"]},  # the built-in example's Panda
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
    ],
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.23",
        "scipy>=1.9",
        "numba>=0.58",
        "rosbags>=0.10",
        "matplotlib>=3.5",
        "tqdm>=4.60",
        "ruamel.yaml>=0.17",  # the replay's --params (a node parameter file)
        "threadpoolctl>=3.0",  # liedyn-excite: BLAS on one thread for its small matrices (optional in the code: rosdep has no key)
        "PyYAML>=5.4",  # liedyn-excite's trajectory files, read as ros2 topic pub reads them
    ],
    extras_require={
        # --identify: the physically consistent fit's solver (250 MB with its solvers, so not in the
        # built-in example's environment)
        "identify": ["cvxpy>=1.4"],
        # the documentation (docs/, Sphinx with MyST Markdown pages)
        "docs": ["sphinx>=7", "myst-parser>=2"],
        "test": [
            "pytest>=7",
            "cvxpy>=1.4",  # the "identify" extra, tested
            "sphinx>=7", "myst-parser>=2",  # the "docs" extra: the docs build is a test
            "pin>=3.0",
            "example-robot-data>=4.1",
            "mujoco>=3.0",
            "mypy>=1.8",
            "hypothesis>=6.80",  # property-based fuzzing of inputs (messages, URDFs, parameters, bags)
            "dask[distributed]>=2024.1", "duckdb>=1.0", "pyarrow>=14", "plotly>=5.0",  # the "fleet" extra, tested
            "playwright>=1.40",  # the fleet report in a real headless browser (Debian's chromium)
        ],
        # liedyn-fleet (liedyn_ros.fleet): many bags on Dask, results in Parquet and DuckDB, an HTML
        # report (plotly); playwright drives a headless Chromium to check that report
        "fleet": ["cvxpy>=1.4", "dask[distributed]>=2024.1", "duckdb>=1.0", "pyarrow>=14", "plotly>=5.0", "playwright>=1.40"],
        # scripts/survey_urdfs.py expands xacro files without a ROS install
        "survey": ["xacro>=2.0"],
        # benchmarks/bench_figaroh.py: the identification beside FIGAROH's on the same recordings
        "figaroh": ["figaroh>=1.0", "pin>=3.0", "example-robot-data>=4.1", "mujoco>=3.0"],
    },
    zip_safe=True,
    maintainer="liedyn_ros developers",
    maintainer_email="liedyn@example.com",
    description="Lie-group rigid-body dynamics for ROS 2 robots",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "dynamics_node = liedyn_ros.node_main:main",
        "dynamics_lifecycle_node = liedyn_ros.node_main:main_lifecycle",
        "liedyn-replay = liedyn_ros.replay.cli:main",
        "replay = liedyn_ros.replay.cli:main",
        "liedyn-fleet = liedyn_ros.fleet.cli:main",
        "liedyn-excite = liedyn_ros.excite_cli:main",
    ]},
)
