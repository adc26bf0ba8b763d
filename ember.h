/* ember: one include for the whole framework. */
#ifndef EMBER_H
#define EMBER_H

#include "tensor/tensor.h"
#include "tensor/safetensors.h"
#include "autograd/autograd.h"
#include "nn/nn.h"
#include "nn/serialize.h"
#include "nn/quantize.h"
#include "nn/quantize_static.h"
#include "nn/onnx.h"
#include "nn/prune.h"
#include "optim/optim.h"
#include "optim/grad_scaler.h"
#include "optim/guards.h"
#include "data/data.h"
#include "serve/cache.h"
#include "serve/engine.h"
#include "serve/request.h"
#include "train/train.h"
#include "train/train_checkpoint.h"
#include "train/batch_finder.h"

#endif
