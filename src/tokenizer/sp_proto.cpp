#include "tokenizer/sp_proto.h"

#include <cstring>

namespace strata::tok {

namespace {

// Protobuf wire-format cursor over one message.
class Reader {
 public:
  Reader(std::string_view data, const std::string* what) : data_(data), what_(what) {}
  bool done() const { return pos_ >= data_.size(); }

  Status varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return truncated();
      auto b = static_cast<uint8_t>(data_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return ok_status();
    }
    return data_loss(*what_ + ": malformed varint at byte " + std::to_string(pos_));
  }
  Status key(uint32_t* field, uint32_t* wire) {
    uint64_t k = 0;
    STRATA_RETURN_IF_ERROR(varint(&k));
    *field = static_cast<uint32_t>(k >> 3);
    *wire = static_cast<uint32_t>(k & 7);
    if (*field == 0) return data_loss(*what_ + ": invalid field number 0");
    return ok_status();
  }
  Status bytes(std::string_view* out) {
    uint64_t len = 0;
    STRATA_RETURN_IF_ERROR(varint(&len));
    if (len > data_.size() - pos_) return truncated();
    *out = data_.substr(pos_, len);
    pos_ += len;
    return ok_status();
  }
  Status fixed32(uint32_t* v) {
    if (data_.size() - pos_ < 4) return truncated();
    std::memcpy(v, data_.data() + pos_, 4);
    pos_ += 4;
    return ok_status();
  }
  Status skip(uint32_t wire) {
    uint64_t v = 0;
    std::string_view s;
    uint32_t f = 0;
    switch (wire) {
      case 0:
        return varint(&v);
      case 1:
        if (data_.size() - pos_ < 8) return truncated();
        pos_ += 8;
        return ok_status();
      case 2:
        return bytes(&s);
      case 5:
        return fixed32(&f);
      default:
        return data_loss(*what_ + ": unsupported protobuf wire type " + std::to_string(wire) +
                         " (is this a SentencePiece .model file?)");
    }
  }

 private:
  Status truncated() const {
    return data_loss(*what_ + ": truncated protobuf data (is this a SentencePiece .model file?)");
  }
  std::string_view data_;
  size_t pos_ = 0;
  const std::string* what_;
};

// Reads a varint-typed scalar field, checking the wire type.
Status expect_varint(Reader& r, uint32_t wire, uint64_t* v, const std::string& what) {
  if (wire != 0) return data_loss(what + ": unexpected wire type for an integer field");
  return r.varint(v);
}

Status parse_piece(std::string_view data, const std::string& what, SpPiece* out) {
  Reader r(data, &what);
  out->type = SpPiece::Type::kNormal;
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    STRATA_RETURN_IF_ERROR(r.key(&field, &wire));
    if (field == 1 && wire == 2) {
      std::string_view s;
      STRATA_RETURN_IF_ERROR(r.bytes(&s));
      out->piece.assign(s);
    } else if (field == 2 && wire == 5) {
      uint32_t bits = 0;
      STRATA_RETURN_IF_ERROR(r.fixed32(&bits));
      std::memcpy(&out->score, &bits, 4);
    } else if (field == 3) {
      uint64_t v = 0;
      STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
      if (v < 1 || v > 6) return data_loss(what + ": unknown piece type " + std::to_string(v));
      out->type = static_cast<SpPiece::Type>(v);
    } else {
      STRATA_RETURN_IF_ERROR(r.skip(wire));
    }
  }
  return ok_status();
}

Status parse_trainer_spec(std::string_view data, const std::string& what, SpModelProto* m) {
  Reader r(data, &what);
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    STRATA_RETURN_IF_ERROR(r.key(&field, &wire));
    uint64_t v = 0;
    switch (field) {
      case 3:  // model_type
        STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
        m->model_type = static_cast<int>(v);
        break;
      case 4:  // vocab_size
        STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
        m->vocab_size = static_cast<int32_t>(v);
        break;
      case 24:  // treat_whitespace_as_suffix
        STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
        m->treat_whitespace_as_suffix = v != 0;
        break;
      case 35:  // byte_fallback
        STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
        m->byte_fallback = v != 0;
        break;
      case 40:
      case 41:
      case 42:
      case 43: {  // unk_id, bos_id, eos_id, pad_id (int32: negatives are 10-byte varints)
        STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
        auto id = static_cast<int32_t>(static_cast<int64_t>(v));
        (field == 40   ? m->unk_id
         : field == 41 ? m->bos_id
         : field == 42 ? m->eos_id
                       : m->pad_id) = id;
        break;
      }
      default:
        STRATA_RETURN_IF_ERROR(r.skip(wire));
    }
  }
  return ok_status();
}

Status parse_normalizer_spec(std::string_view data, const std::string& what, SpModelProto* m) {
  Reader r(data, &what);
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    STRATA_RETURN_IF_ERROR(r.key(&field, &wire));
    uint64_t v = 0;
    std::string_view s;
    if ((field == 1 || field == 2) && wire == 2) {
      STRATA_RETURN_IF_ERROR(r.bytes(&s));
      (field == 1 ? m->normalizer_name : m->precompiled_charsmap).assign(s);
    } else if (field >= 3 && field <= 5) {
      STRATA_RETURN_IF_ERROR(expect_varint(r, wire, &v, what));
      (field == 3   ? m->add_dummy_prefix
       : field == 4 ? m->remove_extra_whitespaces
                    : m->escape_whitespaces) = v != 0;
    } else {
      STRATA_RETURN_IF_ERROR(r.skip(wire));
    }
  }
  return ok_status();
}

}  // namespace

Result<SpModelProto> parse_sentencepiece_model(std::string_view data, const std::string& what) {
  SpModelProto m;
  Reader r(data, &what);
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    STRATA_RETURN_IF_ERROR(r.key(&field, &wire));
    std::string_view sub;
    if (field >= 1 && field <= 3 && wire == 2) {
      STRATA_RETURN_IF_ERROR(r.bytes(&sub));
      if (field == 1) {
        SpPiece p;
        STRATA_RETURN_IF_ERROR(parse_piece(sub, what, &p));
        m.pieces.push_back(std::move(p));
      } else if (field == 2) {
        STRATA_RETURN_IF_ERROR(parse_trainer_spec(sub, what, &m));
      } else {
        STRATA_RETURN_IF_ERROR(parse_normalizer_spec(sub, what, &m));
      }
    } else {
      STRATA_RETURN_IF_ERROR(r.skip(wire));
    }
  }
  if (m.pieces.empty()) {
    return data_loss(what + ": no pieces found (is this a SentencePiece .model file?)");
  }
  return m;
}

}  // namespace strata::tok
