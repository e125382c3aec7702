"""`slurmx reproduce allox`: the AlloX paper's large-scale simulation (EuroSys '20, §5.2.2-§5.3) in our engine.

Setup (§5.1, digest `allox.md` §4.2): 20 GPUs and 20 whole CPU nodes, 10 users x 1,000 jobs with bursty
arrivals standing in for the Google trace, ~10% estimation error, 3% profiling overhead, α = 0.1, five seeds.
Four experiments, selectable with `--only`:

- `main`: average JCT of SRPT, AlloX, AlloX+, DRFA, ES, DRFS, DRFF (Fig. 13): the ordering and the reductions;
- `alpha`: AlloX for α = 0.1 ... 1 (Fig. 16): JCT and the spread of users' progress, gap to SRPT at α = 1;
- `error`: estimation error σ = 0 ... 0.6 for ES, AlloX, SRPT (Fig. 17);
- `overhead`: profiling overhead 0 ... 15% for DRFF, ES, AlloX, SRPT (Fig. 18).

`authors` runs the main comparison on the authors' own input file; `authors-sim` (only when named) runs their
Java simulator beside ours on it and compares job by job (`authors_sim`; needs their pack and a JDK).

Every run is one `RunSpec`; the experiments share identical runs (AlloX at α = 0.1, σ = 0.1, 3% is one run
for all four), and the distinct ones go through `parallel_map`. Times are reported in the workload's time
unit (60 s; the authors' plots call it "mins").
"""

from __future__ import annotations

from slurmx.reproduce.allox import ablation, authors_sim
from slurmx.reproduce.allox.experiment import EXPERIMENTS, run_all, scale_of, selected
from slurmx.reproduce.allox.report import PAPER_REDUCTION, TITLE, report
from slurmx.reproduce.base import Reproduction, ReproOptions

__all__ = ["EXPERIMENTS", "TITLE", "reproduce"]


def reproduce(options: ReproOptions, jobs_per_user: int | None = None) -> Reproduction:
    """Run the selected experiments and compare them with the paper. `jobs_per_user` overrides the scale's
    (the paper's 1,000; quick 15), for a smaller full run on a busy machine."""
    only = selected(options)
    scale = scale_of(options, jobs_per_user)
    seeds = range(scale.seeds)
    results = run_all(only, scale, seeds, options.workers, options.progress)
    rep = report(results, only, scale, seeds, options.quick, options.plot_dir)
    if "authors-sim" in only:
        compared = authors_sim.compare(options.workers, options.progress)
        switched = f" with {' '.join(compared.switches)} ({authors_sim.SWITCHES_ENV})" if compared.switches else ""
        rep.conditions.append(compared.skipped or f"authors-sim: their simulator from {compared.peer} "
                              f"({authors_sim.PEER_ENV}), run with its run.sh{switched} in a temporary directory")
        rep.tables += authors_sim.tables(compared)
        rep.data["authors-sim"] = authors_sim.as_data(compared)
        if compared.skipped:  # the ablation reads the authors' input beside their pack, and is compared with it
            rep.conditions.append("authors-sim: ablation skipped with the comparison")
        elif set(authors_sim.selected_methods()) == set(authors_sim.PEER_METHODS):
            ablated = ablation.ablation(options.workers, options.progress)
            rep.tables.append(ablation.table(ablated, PAPER_REDUCTION))
            rep.data["authors-sim-ablation"] = ablation.as_data(ablated)
        else:
            rep.conditions.append(f"authors-sim: ablation skipped ({authors_sim.METHODS_ENV} names a subset)")
    return rep
