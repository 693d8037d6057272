"""Callbacks of the router CLI: write predicted scores of ``recsys-router predict`` to CSV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pytorch_lightning.callbacks import BasePredictionWriter

__all__ = ["ScoresWriter"]


class ScoresWriter(BasePredictionWriter):
    """Write one CSV row per predicted query: ``query_id``, the routed LLM (argmax of the
    predicted score) and one column of predicted score per LLM.

    Parameters
    ----------
    output_dir : str, optional
        Folder of ``predictions.csv`` (default: the trainer's log dir). With several
        processes each rank writes ``predictions.rank<k>.csv``.
    split : str
        The split to predict (``test`` by default; ``val``, ``train``). ``recsys-router
        predict`` links it to the data module's ``predict_split``, which serves that split;
        the writer takes the query ids from the split the data module served and refuses
        a data module that predicts another split.

    Example
    -------
    >>> ScoresWriter("out").output_dir
    'out'
    """

    def __init__(self, output_dir: str | None = None, split: str = "test"):
        super().__init__(write_interval="epoch")
        self.output_dir = output_dir
        self.split = split

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        if not predictions:
            return
        preds = predictions[0] if isinstance(predictions[0], list) else predictions
        dm = trainer.datamodule
        idx = np.concatenate([p["index"].cpu().numpy() for p in preds])
        scores = np.concatenate([p["scores"].float().cpu().numpy() for p in preds])
        served = getattr(dm, "predict_split", "test")
        if served != self.split:
            raise ValueError(f"predictions.split is {self.split!r} but the data module predicts "
                             f"{served!r}: set data predict_split to {self.split!r}")
        data = dm.splits[dm.eval_split(served)]
        names = list(dm.llm_names)
        out = pd.DataFrame(scores, columns=names)
        out.insert(0, "routed_llm", np.asarray(names, dtype=object)[scores.argmax(axis=1)])
        out.insert(0, "query_id", np.asarray(data.query_ids, dtype=object)[idx])
        out = out.drop_duplicates("query_id")   # DistributedSampler may repeat a query
        folder = Path(self.output_dir or trainer.log_dir or ".")
        folder.mkdir(parents=True, exist_ok=True)
        name = "predictions.csv" if trainer.world_size == 1 else \
            f"predictions.rank{trainer.global_rank}.csv"
        out.to_csv(folder / name, index=False)
