"""The cloud's own sensitivity checks, beside the device's detector (issue 18):
``classifier`` (over the sentence embedding), ``terms`` (a broader lexicon) and
``union`` (how verdicts combine: any sensitive verdict wins, nothing lowers one)."""
