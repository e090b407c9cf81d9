"""Raw text to fairseq binarized data, synonym tables and labelled pairs (see preprocess/)."""
