"""Data loaders and generators: every source becomes the common Passage / Question records.

- ``hipporag``: HippoRAG-format multi-hop sets (MuSiQue, 2WikiMultiHopQA, HotpotQA),
  question sampling and writing a prepared corpus;
- ``download``: Hugging Face file downloads with a recorded sha256;
- ``miniworld``: the project's own fictional multi-hop world (the offline default data).
"""
