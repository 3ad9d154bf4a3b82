// SPDX-License-Identifier: GPL-2.0
// query.hpp - rbln-smi --query=FIELD,... --format=csv[,noheader][,nounits]:
// named per-card fields as CSV, one row per card.  The field names are
// stable (README.md lists them); a new field may be added, none renamed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "card_extras.hpp"
#include "rbln/discovery.hpp"
#include "utilization.hpp"

namespace rbln::smi {

/// One field of --query.
struct QueryField {
    std::string_view name; ///< as on the command line and in the header
    std::string_view unit; ///< "" for none; the header says "name [unit]"
    std::string_view help; ///< one line for --help and README.md
};

/// Every field, in the order --help and README.md list them.
std::span<const QueryField> query_fields();

/// A --query or --format that cannot be used; message says why.
struct QueryError {
    std::string message;
};

/// The fields of "index,name,..." (spaces around a name are ignored; a
/// field may repeat).  Throws QueryError for an empty list or name, or a
/// name that is no field (the message lists the fields).
std::vector<const QueryField*> parse_query(std::string_view list);

/// --format: "csv", then any of "noheader" and "nounits".
struct CsvFormat {
    bool header = true; ///< a first line with the field names
    bool units = true;  ///< values with their unit ("45.0 C"); the header keeps it either way
};

/// Parses --format's value; throws QueryError for anything else.
CsvFormat parse_format(std::string_view text);

/// Whether any of @fields needs the busy counters sampled twice.
bool needs_utilization(std::span<const QueryField* const> fields);

/// @text as one CSV field (RFC 4180: quoted if it holds a comma, a quote,
/// a CR or LF; quotes doubled).
std::string csv_field(std::string_view text);

/// The header line ("index,name,temperature [C]\n").
std::string render_csv_header(std::span<const QueryField* const> fields);

/// One line per card of @discovery.  @util: the sampled figures (nullptr:
/// utilization is N/A); @extras: the cards' extra sysfs figures;
/// @timestamp: the value of the field timestamp.
std::string render_csv_rows(const Discovery& discovery, std::span<const QueryField* const> fields,
                            const CsvFormat& format, const Utilization* util,
                            const ExtrasByBdf& extras, const std::string& timestamp);

/// "2026-12-07T13:44:15.123Z": the UTC time @ns after the Unix epoch.
std::string format_timestamp(std::int64_t unix_ns);

} // namespace rbln::smi
