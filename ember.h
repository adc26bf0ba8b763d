/* ember: one include for the whole framework. */
#ifndef EMBER_H
#define EMBER_H

#include "ember/tensor/tensor.h"
#include "ember/tensor/safetensors.h"
#include "ember/tensor/profiler.h"
#include "ember/tensor/tensorboard.h"
#include "ember/tensor/memory_trend.h"
#include "ember/autograd/autograd.h"
#include "ember/nn/nn.h"
#include "ember/nn/serialize.h"
#include "ember/nn/quantize.h"
#include "ember/nn/quantize_static.h"
#include "ember/nn/onnx.h"
#include "ember/nn/prune.h"
#include "ember/optim/optim.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/guards.h"
#include "ember/data/data.h"
#include "ember/serve/cache.h"
#include "ember/serve/engine.h"
#include "ember/serve/request.h"
#include "ember/train/train.h"
#include "ember/train/observer.h"
#include "ember/train/train_checkpoint.h"
#include "ember/train/batch_finder.h"
#include "ember/dist/dist.h"

#endif
