from .clear_roberta import ClearRobertaModel  # noqa: F401  (registers --arch clear_roberta*)
