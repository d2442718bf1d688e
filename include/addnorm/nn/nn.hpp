// Everything in addnorm's nn layer: layers, blocks, stacks, the sequence model and Adam.
#pragma once

#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/attention.hpp"
#include "addnorm/nn/block.hpp"
#include "addnorm/nn/cross_entropy.hpp"
#include "addnorm/nn/decoder_block.hpp"
#include "addnorm/nn/dropout.hpp"
#include "addnorm/nn/embedding.hpp"
#include "addnorm/nn/feed_forward.hpp"
#include "addnorm/nn/init.hpp"
#include "addnorm/nn/linear.hpp"
#include "addnorm/nn/norm.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "addnorm/nn/stack.hpp"
#include "addnorm/nn/stats.hpp"
#include "addnorm/nn/threads.hpp"
