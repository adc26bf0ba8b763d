/* ember: one include for the whole framework. */
#ifndef EMBER_H
#define EMBER_H

#include "tensor/tensor.h"
#include "autograd/autograd.h"
#include "optim/optim.h"

#endif
