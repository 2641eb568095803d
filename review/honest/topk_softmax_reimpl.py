    from .utils import masked_softmax as softmax_kept
    weights = softmax_kept(scores, keep, axis=-1)
