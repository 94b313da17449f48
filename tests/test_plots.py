"""What the sweep figures show, checked against the saved data (small sweeps)."""

import numpy as np
import pytest

from jaxclear import plots, sweep

WORN = {
    "sweep": {"name": "worn"},
    "model": {"crank_speed_rpm": 5000.0},
    "profile": {"kind": "fourier", "wear_order": 2, "n_points": 24},
    "integrator": {"dt_s": 2e-6, "t_end_s": 2.0e-3, "save_every": 25, "chunk_size": 4},
    "outputs": {"plot_variants": 4},
    "axes": {"joint.clearance_m": {"values": [0.5e-3, 0.1e-3]}, "profile.wear_depth_m": {"values": [0.0, 5e-5]}},
}


@pytest.fixture(scope="module")
def worn(tmp_path_factory):
    out = tmp_path_factory.mktemp("worn")
    table, summary, hists = sweep.run(WORN, out=out, log=None)
    return out, table, summary, hists


def test_block_maximum_channel_reaches_the_exact_peak(worn):
    """The per-save-block maximum over time is the every-step peak of metrics.csv, while the
    sampled history can miss it (the reason the channel exists)."""
    _, table, _, hists = worn
    bm = hists["contact_force_block_max_N"][..., 0]
    sampled = hists["contact_force_N"][..., 0]
    np.testing.assert_allclose(bm.max(axis=1), table["peak_contact_force_N"], rtol=1e-12)
    assert np.all(bm >= sampled - 1e-9)  # the saved sample is one of the block's steps
    assert np.any(sampled.max(axis=1) < 0.999 * table["peak_contact_force_N"])


def test_contact_force_plot_marks_the_exact_peaks_with_full_labels(worn):
    out, table, summary, hists = worn
    fig, ax = plots.plt.subplots()
    idx = [0, 3]
    marks = plots.contact_force_vs_crank_angle(ax, hists, idx, table, axes=summary["axes"])
    for i in idx:
        th, peak = marks[i]
        assert peak == table["peak_contact_force_N"][i]
        k = int(np.argmax(hists["contact_force_block_max_N"][i][:, 0]))
        assert th == pytest.approx(np.degrees(np.unwrap(hists["crank_angle_rad"][i]))[k])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[1] == "#3: clearance 0.1 mm, wear depth 0.05 mm", labels
    plots.plt.close(fig)
    note = plots.sampling_note(sweep.load(out).t_s, 25, True)
    assert "every 25 steps (50 µs, dt = 2 µs)" in note


def test_orbit_plot_draws_each_variants_own_bore(worn):
    """The journal-centre limit of a worn bore reaches (c + w)/c along the wear axis (Fourier
    order-2 wear at 0°) and stays at 1 across it; the unworn bore is the unit circle."""
    _, table, summary, _ = worn
    b = plots.bore_boundaries(sweep.load(worn[0]).spec, table, [0, 1, 3], ["joint.clearance_m", "profile.wear_depth_m"])
    r = {i: np.hypot(*b[i]) for i in b}
    np.testing.assert_allclose(r[0], 1.0, rtol=1e-9)  # c = 0.5 mm, no wear
    assert r[1].max() == pytest.approx(1 + 5e-5 / 0.5e-3, rel=1e-6)
    assert r[3].max() == pytest.approx(1 + 5e-5 / 0.1e-3, rel=1e-6)
    assert r[3].min() == pytest.approx(1.0, rel=1e-6)


def test_maps_one_panel_per_value_of_the_third_axis():
    rng = np.random.default_rng(0)
    c, n, w = np.meshgrid([1e-5, 1e-4, 1e-3], [1000.0, 3000.0], [0.0, 1e-5, 2e-5], indexing="ij")
    table = {
        "clearance_m": c.ravel(),
        "crank_speed_rpm": n.ravel(),
        "wear_depth_m": w.ravel(),
        "daf_x": rng.uniform(1, 5, c.size),
    }
    fig = plots.amplification_maps(table, "clearance_m", "crank_speed_rpm", "daf_x", facet="wear_depth_m")
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["wear depth 0 mm", "wear depth 0.01 mm", "wear depth 0.02 mm"]
    # each panel's cells are that wear value's own numbers (no max over the third axis)
    for a, wv in zip(panels, (0.0, 1e-5, 2e-5)):
        mesh = a.collections[0].get_array().reshape(2, 3)
        sel = table["wear_depth_m"] == wv
        want = table["daf_x"][sel].reshape(3, 2).T
        np.testing.assert_allclose(mesh, want)
    assert panels[0].get_xlabel() == "" or panels[-1].get_xlabel() == "clearance [m]"
    plots.plt.close(fig)


def _longest_blank_band(png):
    """Longest run of entirely white pixel rows between the first and the last row with ink."""
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    blank = (img[..., :3] > 0.99).all(axis=(1, 2))
    ink = np.nonzero(~blank)[0]
    run = best = 0
    for b in blank[ink[0] : ink[-1] + 1]:
        run = run + 1 if b else 0
        best = max(best, run)
    return best


def test_orbit_legend_sits_under_the_axes_without_a_blank_band(worn):
    out, table, summary, hists = worn
    # the saved figure: no band of blank rows between the plot, the legend and the sampling note
    # (the old fixed layout left ~60 px under the legend)
    assert _longest_blank_band(out / "plots" / "journal_orbits.png") < 15
    # and off the data: the legend is under the x label, the note under the legend
    fig = plots.orbit_figure(hists, [0, 3], table, axes=summary["axes"], title="t", note="sampling note")
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    leg = ax.get_legend().get_window_extent(r)
    note = next(c for c in ax.texts if c.get_text() == "sampling note").get_window_extent(r)
    xlab = ax.xaxis.get_tightbbox(r)
    assert leg.y1 < xlab.y0 and xlab.y0 - leg.y1 < 10  # pixels (display units)
    assert note.y1 < leg.y0 and leg.y0 - note.y1 < 15
    plots.plt.close(fig)


def test_orbits_are_normalised_by_the_plotted_joints_own_clearance():
    from jaxclear import plots

    spec = {"joint": {"clearance_m": 2.5e-4}, "joints": {"D": {"clearance_m": 1e-4}}}
    table = {"D.clearance_m": np.array([1e-4, 5e-4]), "finite": np.array([True, True])}
    np.testing.assert_array_equal(plots.joint_clearance(spec, table, "D"), [1e-4, 5e-4])
    np.testing.assert_array_equal(plots.joint_clearance(spec, {"finite": np.ones(2, bool)}, "D"), [1e-4, 1e-4])
    np.testing.assert_array_equal(plots.joint_clearance(spec, {"finite": np.ones(2, bool)}, "B"), [2.5e-4, 2.5e-4])
