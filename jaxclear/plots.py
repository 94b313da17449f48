"""Plots shared by the CLI and the notebooks (matplotlib, Agg backend for files)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if "ipykernel" not in __import__("sys").modules:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def _label(col):
    return col.replace("_", " ")


def pick_variants(table, n):
    """Indices of n variants spread over the sweep (by clearance when it is swept)."""
    B = len(table["finite"])
    key = "clearance_m" if "clearance_m" in table else None
    order = np.argsort(table[key]) if key else np.arange(B)
    return [int(order[i]) for i in np.unique(np.linspace(0, B - 1, min(n, B)).round().astype(int))]


def contact_force_vs_crank_angle(ax, hists, idx, table, joint=0):
    """Contact force [N] against the crank angle [deg] (unwrapped) of chosen variants."""
    for i in idx:
        th = np.degrees(np.unwrap(hists["crank_angle_rad"][i]))
        f = hists["contact_force_N"][i][..., joint]
        lab = f"#{i}" + (f" c={table['clearance_m'][i]*1e3:.3g} mm" if "clearance_m" in table else "")
        ax.plot(th, f, lw=0.8, label=lab)
    ax.set_xlabel("crank angle [deg]")
    ax.set_ylabel("contact force [N]")
    ax.legend(fontsize=7)


def orbits(ax, hists, idx, table, clearance=None, joint=0):
    """Journal-centre orbits in the bearing frame, normalised by the clearance (unit circle)."""
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), "k--", lw=0.8, label="clearance circle")
    for i in idx:
        c = table["clearance_m"][i] if "clearance_m" in table else clearance
        x = hists["journal_x_m"][i][..., joint] / c
        y = hists["journal_y_m"][i][..., joint] / c
        ax.plot(x, y, lw=0.6, label=f"#{i}")
    ax.set_aspect("equal")
    ax.set_xlabel("x / c [-]")
    ax.set_ylabel("y / c [-]")
    ax.legend(fontsize=7)


def amplification_map(ax, table, xkey, ykey, zkey):
    """A metric over two swept axes: pcolormesh on a full grid, scatter otherwise."""
    x, y, z = np.asarray(table[xkey]), np.asarray(table[ykey]), np.asarray(table[zkey], float)
    ux, uy = np.unique(x), np.unique(y)
    logx = ux.size > 2 and ux.min() > 0 and ux.max() / ux.min() > 20
    if ux.size * uy.size <= len(x) and ux.size > 1 and uy.size > 1:
        grid = np.full((uy.size, ux.size), np.nan)
        for xi, yi, zi in zip(x, y, z):
            j, i = np.searchsorted(ux, xi), np.searchsorted(uy, yi)
            grid[i, j] = np.nanmax([grid[i, j], zi])  # max over the other axes
        im = ax.pcolormesh(ux, uy, grid, shading="nearest")
    else:
        im = ax.scatter(x, y, c=z, s=12)
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(_label(xkey))
    ax.set_ylabel(_label(ykey))
    plt.colorbar(im, ax=ax, label=_label(zkey) + " (max over other axes)")


def sweep_plots(outdir, table, summary, hists, t, spec, amplified=("contact_force", "slider_acceleration")):
    """Write the standard PNGs of a sweep into outdir/plots; return their relative paths.
    amplified: the quantities whose DAF / ratio columns are mapped over the axes."""
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    idx = pick_variants(table, int(spec["outputs"]["plot_variants"]))
    clearance = spec["joint"]["clearance_m"]
    if "contact_force_N" in hists and "crank_angle_rad" in hists:
        fig, ax = plt.subplots(figsize=(8, 4))
        contact_force_vs_crank_angle(ax, hists, idx, table)
        ax.set_title(f"{summary['name']}: contact force ({summary['clearance_joint']} joint)")
        fig.tight_layout()
        fig.savefig(pdir / "contact_force_vs_crank_angle.png", dpi=110)
        plt.close(fig)
        written.append("plots/contact_force_vs_crank_angle.png")
    if "journal_x_m" in hists and "journal_y_m" in hists:
        fig, ax = plt.subplots(figsize=(5, 5))
        orbits(ax, hists, idx, table, clearance)
        ax.set_title("journal-centre orbits")
        fig.tight_layout()
        fig.savefig(pdir / "journal_orbits.png", dpi=110)
        plt.close(fig)
        written.append("plots/journal_orbits.png")
    axes = summary["axes"]
    if len(axes) >= 2:
        for z in tuple(f"daf_{a}_steady" for a in amplified):
            fig, ax = plt.subplots(figsize=(6, 4.5))
            amplification_map(ax, table, axes[0], axes[1], z)
            fig.tight_layout()
            fig.savefig(pdir / f"map_{z}.png", dpi=110)
            plt.close(fig)
            written.append(f"plots/map_{z}.png")
    elif len(axes) == 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for z in (f"ratio_{amplified[0]}", f"ratio_{amplified[0]}_steady", f"ratio_{amplified[1]}_steady"):
            ax.plot(table[axes[0]], table[z], "o-", label=z)
        ax.set_xlabel(_label(axes[0]))
        ax.set_ylabel("max(clearance) / max(ideal) [-]")
        if np.min(table[axes[0]]) > 0:
            ax.set_xscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(pdir / "amplification_vs_axis.png", dpi=110)
        plt.close(fig)
        written.append("plots/amplification_vs_axis.png")
    return written
