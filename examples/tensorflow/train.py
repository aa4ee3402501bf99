"""TensorFlow example: MultiWorkerMirroredStrategy training of a small Keras model across nodes, on CPU.

The tensorflow-distributed runtime gives every node a TF_CONFIG naming all workers (`<trainjob>-node-0-<i>`) and
this node's index; `MultiWorkerMirroredStrategy` reads it and all-reduces the gradients of every step across the
workers. The loop is a custom one (`strategy.run`), the pattern TensorFlow documents for multi-worker training:
Keras 3's `model.fit` does not support MultiWorkerMirroredStrategy (keras-team/keras#20585).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the log to the training output

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

EPOCHS = int(os.environ.get("EPOCHS", "5"))
BATCH_PER_WORKER = 64


def dataset(global_batch: int) -> tf.data.Dataset:
    # The same data on every worker (seed 0); the strategy gives each worker its own part of every global batch.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1)) + 0.1 * rng.normal(size=(4096, 1))).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=0).batch(global_batch, drop_remainder=True)


def main() -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    workers = strategy.num_replicas_in_sync
    print(f"worker {task['index']}/{workers} joined", flush=True)
    global_batch = BATCH_PER_WORKER * workers
    batches = strategy.experimental_distribute_dataset(dataset(global_batch))

    with strategy.scope():  # variables created here are mirrored on every worker
        model = keras.Sequential(
            [keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
        )
        optimizer = keras.optimizers.Adam(0.01)

    def train_step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        x, y = inputs
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=1)
            # Scaled by the global batch, so the all-reduced (summed) gradients are those of the global mean.
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def distributed_step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        losses = strategy.run(train_step, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for epoch in range(EPOCHS):
        total, steps = 0.0, 0
        for batch in batches:
            total += float(distributed_step(batch))
            steps += 1
        if task["index"] == 0:
            print(f"epoch {epoch + 1}/{EPOCHS} loss {total / steps:.4f}", flush=True)

    # Mirrored variables: every worker must end with the same weights.
    checksum = sum(float(tf.reduce_sum(v)) for v in model.trainable_variables)
    sys.stdout.write(f"worker {task['index']}: weight checksum {checksum:.6f}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
