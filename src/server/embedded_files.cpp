// Looking up the embedded page files by URL path.
#include "server/embedded_files.hpp"

namespace addnorm::server {

const EmbeddedFile* find_embedded_file(std::string_view url_path) {
  if (url_path == "/") url_path = "/index.html";
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path == url_path) return &file;
  }
  return nullptr;
}

}  // namespace addnorm::server
