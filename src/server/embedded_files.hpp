// The lab page's files, embedded in the binary at build time (embed_web_files.cmake turns web/**
// into byte arrays). The server serves these and nothing else: a request path is looked up here
// by exact match, never joined to a directory, so no path can reach the file system.
#pragma once

#include <span>
#include <string_view>

namespace addnorm::server {

struct EmbeddedFile {
  std::string_view path;          // the URL path, "/index.html", "/js/app.js"
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view data;
};

// Every embedded file, sorted by path.
std::span<const EmbeddedFile> embedded_files();

// The file served at `url_path` ("/" is "/index.html"), or nullptr.
const EmbeddedFile* find_embedded_file(std::string_view url_path);

}  // namespace addnorm::server
