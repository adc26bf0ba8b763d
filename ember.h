/* ember: one include for the whole framework, layer by layer from the tensor up. */
#ifndef EMBER_H
#define EMBER_H

#include "ember/tensor/tensor.h"
#include "ember/io/safetensors.h"
#include "ember/observe/profiler.h"
#include "ember/observe/tensorboard.h"
#include "ember/observe/memory_trend.h"
#include "ember/autograd/autograd.h"
#include "ember/autograd/function.h"
#include "ember/autograd/gradcheck.h"
#include "ember/data/data.h"
#include "ember/nn/nn.h"
#include "ember/optim/optim.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/guards.h"
#include "ember/quant/quantize.h"
#include "ember/quant/quantize_static.h"
#include "ember/prune/prune.h"
#include "ember/export/serialize.h"
#include "ember/export/onnx.h"
#include "ember/models/gpt.h"
#include "ember/models/model_file.h"
#include "ember/train/train.h"
#include "ember/train/observer.h"
#include "ember/train/train_checkpoint.h"
#include "ember/train/batch_finder.h"
#include "ember/serve/cache.h"
#include "ember/serve/engine.h"
#include "ember/serve/request.h"
#include "ember/dist/dist.h"

#endif
