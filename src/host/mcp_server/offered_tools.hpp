#pragma once
// What psych mcp's tools/list offers: run_code, whose description is made from the catalogue the
// program will be bound to (what it may call and how), and read_tool_output. Pure text: the session
// calls it at each tools/list with the catalogue read then.
#include <string>
#include <vector>

#include "psych/budget.hpp"
#include "psych/host/bindings.hpp"
#include "psych/terms.hpp"

namespace psych::host {

inline constexpr std::string_view read_tool_output_tool = "read_tool_output";

/// The most bytes the catalogue's part of run_code's description takes: the tools with their
/// descriptions if they fit, else their names if those fit, else only how many each server has
/// (list_tools() in the program reads the rest). Every byte is in every prompt of the client's.
inline constexpr std::size_t description_catalogue_bytes = 3000;

/// run_code's description: what it does and returns, the terms it runs under, the tools a program
/// may call (sorted, each with the first sentence of its description while that fits), how to call
/// them, TOOLS, list_tools/get_tool_info for schemas, and the budget.
std::string run_code_description(const std::vector<binding>& tools, const execution_terms& terms,
                                 const binding_budget& budget, bool outputs_preserved);

/// The tools/list result: {"tools": [run_code, read_tool_output]}, one JSON object.
std::string tools_list_json(const std::string& run_code_text, bool outputs_preserved);

}  // namespace psych::host
