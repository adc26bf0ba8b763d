/* What models/gpt.c shares with models/gpt_onnx.c. Not installed. */
#ifndef EMBER_MODELS_GPT_INTERNAL_H
#define EMBER_MODELS_GPT_INTERNAL_H

#include "nn/nn.h"

/* Makes em_onnx_export write modules of type (the GPT's) as ONNX graphs; again is a no-op;
 * any thread. */
void em_gpt_onnx_register(const em_module_type *type);

#endif
