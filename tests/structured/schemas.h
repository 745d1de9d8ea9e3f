#pragma once
// JSON schemas of different shapes, shared by the grammar tests and the mask benchmark's
// choice of schemas. Every one is inside the documented subset.
#include <string>
#include <vector>

namespace pypto::structured::test {

inline const std::vector<std::string>& test_schemas() {
  static const std::vector<std::string> s = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":130}},"required":["name","age"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"integer","minimum":-50,"maximum":50},"minItems":1,"maxItems":5})",
      R"({"type":"string","enum":["red","green","blue"]})",
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"note":{"type":["string","null"],"maxLength":8}},"required":["ok"]})",
      R"({"type":"object","properties":{"when":{"type":"string","format":"date"},"at":{"type":"string","format":"time"}},"required":["when","at"]})",
      R"({"type":"object","properties":{"ts":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"}},"required":["ts","id"]})",
      R"({"type":"object","properties":{"email":{"type":"string","format":"email"}},"required":["email"]})",
      R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2,4}$"}},"required":["code"]})",
      R"({"type":"array","prefixItems":[{"type":"string","maxLength":5},{"type":"number","minimum":0,"maximum":10}],"items":false,"minItems":2})",
      R"({"anyOf":[{"type":"integer","minimum":100,"maximum":999},{"type":"string","minLength":2,"maxLength":4}]})",
      R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","minimum":0,"maximum":100}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"integer","minimum":1,"maximum":9}},"required":["kind","side"],"additionalProperties":false}]})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
      R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3},"count":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}},"required":["tags","count"]})",
      R"({"type":"number","minimum":-5,"maximum":5})",
      R"({"type":"integer","minimum":1000000})",
      R"({"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":"array","items":{"type":"boolean"},"maxItems":2}},"required":["y"],"additionalProperties":false}},"required":["x"],"additionalProperties":false})",
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"string","maxLength":3},"c":{"type":"string","maxLength":3}}})",
      R"({"type":"object","properties":{"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":2},"minItems":2,"maxItems":3}},"required":["matrix"]})",
      R"({"type":"object","properties":{"title":{"type":"string","minLength":1,"maxLength":10,"description":"a title"},"pages":{"type":"integer","minimum":1,"maximum":2000}},"required":["title"],"title":"Book"})",
      R"({"type":"null"})",
      R"({"type":"boolean"})",
      R"({"const":{"fixed":[1,2,"x"]}})",
      R"({"type":"object","properties":{"u":{"type":"string","pattern":"é+ü?"}},"required":["u"],"additionalProperties":false})",
      R"({"type":"array","items":{"enum":[1,"two",null,true]},"minItems":0,"maxItems":4})",
      R"({"type":"array","items":{"type":"number","minimum":-2.5,"exclusiveMaximum":0.75},"minItems":1,"maxItems":6})",
      R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[a-zé\n]+[0-9]*$","minLength":3,"maxLength":7},"tag":{"type":"string","pattern":"x","maxLength":4},"mail":{"type":"string","format":"email","maxLength":12}},"required":["code","tag","mail"],"additionalProperties":false})",
      R"({"type":"array","items":{"oneOf":[{"type":"number","maximum":0},{"type":"integer","exclusiveMinimum":0,"maximum":99},{"type":"string","maxLength":3},{"enum":[null,true]}]},"maxItems":6})",
      R"({"$defs":{"a":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"oneOf":[{"$ref":"#/$defs/a"},{"type":"object","properties":{"y":{"type":"boolean"}},"required":["y"],"additionalProperties":false}]})",
      R"({"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0,"maximum":1},"t":{"type":"number","exclusiveMinimum":-0.001,"exclusiveMaximum":0.001}},"required":["p","t"],"additionalProperties":false})",
  };
  return s;
}

}  // namespace pypto::structured::test
