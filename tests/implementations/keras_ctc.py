"""A CTC in Keras 3's calling convention, as a Keras user writes one: a thin call of
``keras.ops.ctc_loss`` on whatever backend Keras runs on."""
import keras


def ctc_loss(target, output, target_length, output_length, mask_index=0):
    return keras.ops.ctc_loss(target, output, target_length, output_length,
                              mask_index=mask_index)
