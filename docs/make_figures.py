"""Figures of docs/mechanisms.md from finished sweep directories (run the specs first):

jaxclear run sweeps/four_bar.toml --out runs/four_bar
jaxclear run sweeps/one_joint_slider_crank.toml --out runs/one_joint_slider_crank
jaxclear run sweeps/two_joints_slider_crank.toml --out runs/two_joints_slider_crank
python docs/make_figures.py runs docs/figures
"""

import shutil
import sys
from pathlib import Path

import numpy as np

import jaxclear  # noqa: F401  (float64)
from jaxclear import plots, sweep
from jaxclear.mechanisms import slider_crank as sc

plt = plots.plt


def two_joints(runs: Path, dest: Path, variant=0):
    """Analogue of Fig. 9 of Zheng et al.: slider velocity, acceleration and joint forces over the last two
    crank revolutions, one clearance joint (rod–slider) against two, and the journal orbits."""
    one, two = sweep.load(runs / "one_joint_slider_crank"), sweep.load(runs / "two_joints_slider_crank")
    c = float(one.inputs["clearance_m"][variant])
    t = one.t_s
    p = sc.benchmark_params(clearance=c, ramp_time=0.024)
    ide = {k: np.asarray(v) for k, v in sc.ideal(p, t).items()}
    period = 60.0 / 5000.0
    m = t >= t[-1] - 2 * period
    th = lambda r: np.degrees(
        np.unwrap(r.histories["crank_angle_rad"][variant][m]) - np.unwrap(r.histories["crank_angle_rad"][variant][m])[0]
    )
    fig, axs = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    thi = np.degrees(ide["theta"][m] - ide["theta"][m][0])
    vel_i = np.gradient(ide["slider_position"], t)
    for r, lab in ((one, "one clearance joint (rod–slider)"), (two, "two clearance joints")):
        axs[0].plot(th(r), r.histories["slider_velocity_m_per_s"][variant][m], lw=0.8, label=lab)
        axs[1].plot(th(r), r.histories["slider_acceleration_m_per_s2"][variant][m], lw=0.8, label=lab)
    f1 = one.histories["contact_force_N"][variant][m]
    f2 = two.histories["contact_force_N"][variant][m]
    axs[2].plot(th(one), f1[:, 0], lw=0.8, label="one joint: rod–slider")
    for j, nm in enumerate(two.attrs["joints"]):
        axs[2].plot(th(two), f2[:, j], lw=0.8, label=f"two joints: {nm.replace('_', '–')}")
    axs[0].plot(thi, vel_i[m], "k--", lw=0.9, label="ideal")
    axs[1].plot(thi, ide["slider_acceleration"][m], "k--", lw=0.9, label="ideal")
    axs[2].plot(thi, ide["reaction_rod_slider"][m], "k--", lw=0.9, label="ideal rod–slider")
    axs[0].set_ylabel("slider velocity [m/s]")
    axs[1].set_ylabel("slider acceleration [m/s²]")
    axs[2].set_ylabel("joint force [N]")
    axs[2].set_xlabel("crank angle over the last two revolutions [deg]")
    for ax in axs:
        ax.legend(fontsize=7)
    axs[0].set_title(f"slider-crank, 5000 rpm after a 0.024 s ramp, c = {c * 1e3:g} mm (Zheng et al. Fig. 9)")
    fig.tight_layout()
    fig.savefig(dest / "two_joints_slider_crank.png", dpi=110)
    plt.close(fig)
    fig, axs = plt.subplots(1, 3, figsize=(12, 4.2))
    ang = np.linspace(0, 2 * np.pi, 200)
    cases = [(one, 0, "one joint: rod–slider")] + [
        (two, j, f"two joints: {nm.replace('_', '–')}") for j, nm in enumerate(two.attrs["joints"])
    ]
    for ax, (r, j, lab) in zip(axs, cases):
        ax.plot(np.cos(ang), np.sin(ang), "k--", lw=0.8)
        ax.plot(
            r.histories["journal_x_m"][variant][m][:, j] / c, r.histories["journal_y_m"][variant][m][:, j] / c, lw=0.6
        )
        ax.set_aspect("equal")
        ax.set_title(lab, fontsize=9)
        ax.set_xlabel("x / c")
    axs[0].set_ylabel("y / c")
    fig.tight_layout()
    fig.savefig(dest / "two_joints_orbits.png", dpi=110)
    plt.close(fig)


def main(runs, dest):
    runs, dest = Path(runs), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if (runs / "two_joints_slider_crank").exists():
        two_joints(runs, dest)
    for name, files in (
        ("four_bar", ("follower_vs_crank_angle.png", "amplification_vs_axis.png", "journal_orbits.png")),
    ):
        for f in files:
            src = runs / name / "plots" / f
            if src.exists():
                shutil.copy(src, dest / f"{name}_{f}")


if __name__ == "__main__":
    main(*(sys.argv[1:3] if len(sys.argv) > 2 else ("runs", "docs/figures")))
