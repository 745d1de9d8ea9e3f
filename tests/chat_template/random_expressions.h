#pragma once
// Randomly generated template expressions (a fixed seed, so the same list every run) for a
// differential test against @huggingface/jinja: they combine values, operators, filters,
// tests, methods, member access and slices in ways no hand-written case list covers.
#include <string>
#include <vector>

namespace pypto::test {

std::vector<std::string> random_expression_templates(unsigned seed, size_t count);

// Random short programs: set / namespace / for (with tuple targets, filters, else, continue) /
// if-elif / macro calls, each fed random expressions.
std::vector<std::string> random_program_templates(unsigned seed, size_t count);

// Random layouts of text and whitespace around tags, comments and blocks with and without the
// `-` markers: exercises trim_blocks / lstrip_blocks / whitespace control as the oracle does them.
std::vector<std::string> random_layout_templates(unsigned seed, size_t count);

}  // namespace pypto::test
