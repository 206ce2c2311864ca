// tests/test_template_families.c — templates of other model families run
// by the same interpreter: the Qwen3 chat template (as published with
// Qwen/Qwen3-8B), a GLM-style template (macros, reasoning split, tool
// calls with argument loops, tojson(ensure_ascii=False)) and a Kimi-K2-style
// one. Expected outputs were rendered by an independent implementation, npm
// @huggingface/jinja 0.5.11 (trim_blocks + lstrip_blocks), except where noted.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"

static const char CASES[] =
    "[\n"
    " {\"messages\":[{\"role\":\"system\",\"content\":\"You are Qwen.\"},{\"role\":\"user\",\"content\":\""
    "Hi!\"}],\"add_generation_prompt\":true},\n"
    " {\"messages\":[{\"role\":\"user\",\"content\":\"What's the weather in Paris?\"},{\"role\":\"assista"
    "nt\",\"content\":\"<think>\\nNeed a tool.\\n</think>\\n\\nLet me check.\",\"tool_calls\":[{\"type\":"
    "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":2}}}]"
    "},{\"role\":\"tool\",\"content\":\"{\\\"temp\\\": 21}\"},{\"role\":\"tool\",\"content\":\"sunny\"},{"
    "\"role\":\"assistant\",\"content\":\"It is 21\302\260C and sunny.\"},{\"role\":\"user\",\"content\":"
    "\"Thanks \350\260\242\350\260\242\"}],\"add_generation_prompt\":true,\"tools\":[{\"type\":\"function"
    "\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather \\\"now\\\"\",\"parameters\":{\""
    "type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]},\n"
    " {\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"multi\"},{\"type\":\"t"
    "ext\",\"text\":\"part\"}]},{\"role\":\"assistant\",\"content\":\"ok\",\"reasoning_content\":\"  thin"
    "king  \"}],\"add_generation_prompt\":false,\"enable_thinking\":false},\n"
    " {\"messages\":[{\"role\":\"system\",\"content\":\"  S  \\n\"},{\"role\":\"user\",\"content\":\"line"
    "1\\nline2\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"funct"
    "ion\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}},{\"type\":\"function\",\"function\":{\"name"
    "\":\"g\",\"arguments\":{\"x\":[1,2]}}}]},{\"role\":\"tool\",\"content\":\"r\"}],\"add_generation_pro"
    "mpt\":true,\"enable_thinking\":true}\n"
    "]\n"
    "";

static const char QWEN3[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou ar"
    "e provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and argum"
    "ents within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"ar"
    "guments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and not(mes"
    "sage.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.content is string %}\n"
    "        {%- set content = message.content %}\n"
    "    {%- else %}\n"
    "        {%- set content = '' %}\n"
    "    {%- endif %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is string %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- else %}\n"
    "            {%- if '</think>' in content %}\n"
    "                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think"
    ">')[-1].lstrip('\\n') %}\n"
    "                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n')"
    " + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "            {%- endif %}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "";

static const char GLMISH[] =
    "[gMASK]<sop>\n"
    "{%- macro visible_text(content) -%}\n"
    "    {%- if content is string -%}\n"
    "        {{- content }}\n"
    "    {%- elif content is iterable and content is not mapping -%}\n"
    "        {%- for item in content -%}\n"
    "            {%- if item is mapping and item.type == 'text' -%}\n"
    "                {{- item.text }}\n"
    "            {%- elif item is string -%}\n"
    "                {{- item }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{- content }}\n"
    "    {%- endif -%}\n"
    "{%- endmacro -%}\n"
    "{%- if tools -%}\n"
    "<|system|>\n"
    "# Tools\n"
    "{% for tool in tools %}\n"
    "{{ tool | tojson(ensure_ascii=False) }}\n"
    "{% endfor %}\n"
    "{%- endif -%}\n"
    "{%- for m in messages %}\n"
    "{%- if m.role == 'user' -%}<|user|>\n"
    "{{ visible_text(m.content) }}\n"
    "{%- elif m.role == 'assistant' -%}\n"
    "<|assistant|>\n"
    "{%- set content = visible_text(m.content) %}\n"
    "{%- if m.reasoning_content is string %}\n"
    "{%- set reasoning = m.reasoning_content %}\n"
    "{%- elif '</think>' in content %}\n"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "\n"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "{%- else %}\n"
    "{%- set reasoning = '' %}\n"
    "{%- endif %}\n"
    "<think>{{ reasoning.strip() }}</think>\n"
    "{%- if content.strip() %}\n"
    "\n"
    "{{ content.strip() }}\n"
    "{%- endif %}\n"
    "{% if m.tool_calls %}\n"
    "{% for tc in m.tool_calls %}\n"
    "{%- if tc.function %}{%- set tc = tc.function %}{%- endif %}\n"
    "<tool_call>{{ tc.name }}\n"
    "{% set _args = tc.arguments %}\n"
    "{%- if _args is string %}{{ _args }}{% else %}{% for k, v in _args.items() %}<arg_key>{{ k }}</arg_k"
    "ey>\n"
    "<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>\n"
    "{% endfor %}{% endif %}</tool_call>{% endfor %}\n"
    "{% endif %}\n"
    "{%- elif m.role == 'tool' -%}\n"
    "{%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}<|observation|>{% endif %}\n"
    "<tool_response>\n"
    "{{ m.content }}\n"
    "</tool_response>\n"
    "{%- elif m.role == 'system' -%}\n"
    "<|system|>\n"
    "{{ visible_text(m.content) }}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    <|assistant|>{{- '\\n<think></think>' if (enable_thinking is defined and not enable_thinking) el"
    "se '' -}}\n"
    "{%- endif -%}\n"
    "";

static void run(const char *tmpl, const char *const *want, int n)
{
    json_object *cases = json_tokener_parse(CASES);
    cr_assert(cases);
    cr_assert_eq((int)json_object_array_length(cases), n);
    for (int i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(cases, (size_t)i), *m, *agp;
        json_object_object_get_ex(c, "messages", &m);
        json_object_object_get_ex(c, "add_generation_prompt", &agp);
        char *out;
        pt_err err = {{0}};
        // the case object doubles as extra context (tools, enable_thinking)
        int rc = pt_chat_render(tmpl, m, json_object_get_boolean(agp), "<s>", "</s>", c, &out, NULL, &err);
        cr_assert_eq(rc, 0, "case %d: %s", i, err.msg);
        cr_expect_str_eq(out, want[i], "case %d", i);
        free(out);
    }
    json_object_put(cases);
}

Test(template_families, qwen3)
{
    static const char *const want[] = {
        "<|im_start|>system\n"
    "You are Qwen.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hi!<|im_end|>\n"
    "<|im_start|>assistant\n"
    "",
        "<|im_start|>system\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"no"
    "w\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
    "\"required\": [\"city\"]}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></to"
    "ol_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "What's the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Let me check.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temp\": 21}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "sunny\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "It is 21\302\260C and sunny.<|im_end|>\n"
    "<|im_start|>user\n"
    "Thanks \350\260\242\350\260\242<|im_end|>\n"
    "<|im_start|>assistant\n"
    "",
        "<|im_start|>user\n"
    "<|im_end|>\n"
    "<|im_start|>assistant\n"
    "ok<|im_end|>\n"
    "",
        "<|im_start|>system\n"
    "  S  \n"
    "<|im_end|>\n"
    "<|im_start|>user\n"
    "line1\n"
    "line2<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"g\", \"arguments\": {\"x\": [1, 2]}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "r\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "",
    };
    run(QWEN3, want, 4);
}

Test(template_families, glm_style)
{
    static const char *const want[] = {
        "[gMASK]<sop><|system|>\n"
    "You are Qwen.<|user|>\n"
    "Hi!<|assistant|>",
        "[gMASK]<sop><|system|>\n"
    "# Tools\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"no"
    "w\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
    "\"required\": [\"city\"]}}}\n"
    "<|user|>\n"
    "What's the weather in Paris?<|assistant|><think>Need a tool.</think>\n"
    "Let me check.<tool_call>get_weather\n"
    "<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n"
    "<arg_value>2</arg_value>\n"
    "</tool_call><|observation|><tool_response>\n"
    "{\"temp\": 21}\n"
    "</tool_response><tool_response>\n"
    "sunny\n"
    "</tool_response><|assistant|><think></think>\n"
    "It is 21\302\260C and sunny.<|user|>\n"
    "Thanks \350\260\242\350\260\242<|assistant|>",
        "[gMASK]<sop><|user|>\n"
    "multipart<|assistant|><think>thinking</think>\n"
    "ok",
        // case 3 by hand: Jinja2 renders a None content as "None" (the JS
        // renderer prints nothing), so the macro yields "None" here
        "[gMASK]<sop><|system|>\n"
    "  S  \n"
    "<|user|>\n"
    "line1\n"
    "line2<|assistant|><think></think>\nNone<tool_call>f\n"
    "{\"a\": 1}</tool_call><tool_call>g\n"
    "<arg_key>x</arg_key>\n"
    "<arg_value>[1, 2]</arg_value>\n"
    "</tool_call><|observation|><tool_response>\n"
    "r\n"
    "</tool_response><|assistant|>",
    };
    run(GLMISH, want, 4);
}

// A Kimi-K2-style template (dict .get(), `in` on dicts, content parts,
// tool-call ids); same reference renderer.
static const char CASES_KIMI[] =
    "[{\"messages\": [{\"role\": \"system\", \"content\": \"You are Qwen.\"}, {\"role\": \"user\", \"cont"
    "ent\": \"Hi!\"}], \"add_generation_prompt\": true}, {\"messages\": [{\"role\": \"user\", \"content\""
    ": \"What's the weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"<think>\\nNeed a tool."
    "\\n</think>\\n\\nLet me check.\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\":"
    " \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}, \"id\": \"functions.get_weathe"
    "r:0\"}]}, {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 21}\", \"tool_call_id\": \"functions.ge"
    "t_weather:0\"}, {\"role\": \"tool\", \"content\": \"sunny\"}, {\"role\": \"assistant\", \"content\":"
    " \"It is 21\\u00b0C and sunny.\"}, {\"role\": \"user\", \"content\": \"Thanks \\u8c22\\u8c22\"}], \""
    "add_generation_prompt\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_w"
    "eather\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"propert"
    "ies\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}, {\"messages\": [{\"role\":"
    " \"user\", \"content\": [{\"type\": \"text\", \"text\": \"multi\"}, {\"type\": \"text\", \"text\": \""
    "part\"}]}, {\"role\": \"assistant\", \"content\": \"ok\", \"reasoning_content\": \"  thinking  \"}],"
    " \"add_generation_prompt\": false, \"enable_thinking\": false}, {\"messages\": [{\"role\": \"system\""
    ", \"content\": \"  S  \\n\"}, {\"role\": \"user\", \"content\": \"line1\\nline2\"}, {\"role\": \"ass"
    "istant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\""
    ", \"arguments\": \"{\\\"a\\\": 1}\"}}, {\"type\": \"function\", \"function\": {\"name\": \"g\", \"ar"
    "guments\": {\"x\": [1, 2]}}}]}, {\"role\": \"tool\", \"content\": \"r\"}], \"add_generation_prompt\""
    ": true, \"enable_thinking\": true}, {\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\""
    "role\": \"user\", \"name\": \"bob\", \"content\": [{\"type\": \"text\", \"text\": \"look\"}, {\"type"
    "\": \"image_url\", \"image_url\": {\"url\": \"x\"}}]}], \"add_generation_prompt\": true}]";

static const char KIMI[] =
    "{%- if tools -%}\n"
    "  <|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>\n"
    "{%- endif -%}\n"
    "{% for message in messages %}\n"
    "  {%- if loop.first and messages[0]['role'] != 'system' -%}\n"
    "  <|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>\n"
    "  {% endif %}\n"
    "  {%- set role_name =  message.get('name') or  message['role'] -%}\n"
    "  {%- if message['role'] == 'user' -%}\n"
    "    <|im_user|>{{role_name}}<|im_middle|>\n"
    "  {%- elif message['role'] == 'assistant' -%}\n"
    "    <|im_assistant|>{{role_name}}<|im_middle|>\n"
    "  {%- else -%}\n"
    "    <|im_system|>{{role_name}}<|im_middle|>\n"
    "  {%- endif -%}\n"
    "  {%- if message['role'] == 'assistant' and message.get('tool_calls') -%}\n"
    "    {%- if message['content'] -%}{{ message['content'] }}{%- endif -%}\n"
    "    <|tool_calls_section_begin|>\n"
    "    {%- for tool_call in message['tool_calls'] -%}\n"
    "      {%- set formatted_id = tool_call['id'] -%}\n"
    "      <|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>{% if tool_call['function']['"
    "arguments'] is string %}{{ tool_call['function']['arguments'] }}{% else %}{{ tool_call['function']['"
    "arguments'] | tojson }}{% endif %}<|tool_call_end|>\n"
    "    {%- endfor -%}\n"
    "    <|tool_calls_section_end|>\n"
    "  {%- elif message['role'] == 'tool' -%}\n"
    "    ## Return of {{ message.tool_call_id }}\n"
    "{{ message['content'] }}\n"
    "  {%- elif message['content'] is string -%}\n"
    "    {{ message['content'] }}\n"
    "  {%- elif message['content'] is not none -%}\n"
    "    {% for content in message['content'] -%}\n"
    "      {% if content['type'] == 'image' or 'image' in content or 'image_url' in content -%}\n"
    "        <|media_start|>image<|media_content|><|media_pad|><|media_end|>\n"
    "      {% else -%}\n"
    "        {{ content['text'] }}\n"
    "      {%- endif -%}\n"
    "    {%- endfor -%}\n"
    "  {%- endif -%}\n"
    "  <|im_end|>\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  <|im_assistant|>assistant<|im_middle|>\n"
    "{%- endif -%}\n"
    "";

Test(template_families, kimi_style)
{
    static const char *const want[] = {
        "<|im_system|>system<|im_middle|>You are Qwen.<|im_end|><|im_user|>user<|im_middle|>Hi!<|im_end|><|im"
    "_assistant|>assistant<|im_middle|>",
        "<|im_system|>tool_declare<|im_middle|>[{\"type\": \"function\", \"function\": {\"name\": \"get_weath"
    "er\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"properties\""
    ": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]<|im_end|><|im_system|>system<|im_"
    "middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>\n"
    "<|im_user|>user<|im_middle|>What's the weather in Paris?<|im_end|><|im_assistant|>assistant<|im_midd"
    "le|><think>\n"
    "Need a tool.\n"
    "</think>\n"
    "\n"
    "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argum"
    "ent_begin|>{\"city\": \"Paris\", \"days\": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|><|"
    "im_system|>tool<|im_middle|>## Return of functions.get_weather:0\n"
    "{\"temp\": 21}<|im_end|><|im_system|>tool<|im_middle|>## Return of \n"
    "sunny<|im_end|><|im_assistant|>assistant<|im_middle|>It is 21\302\260C and sunny.<|im_end|><|im_user"
    "|>user<|im_middle|>Thanks \350\260\242\350\260\242<|im_end|><|im_assistant|>assistant<|im_middle|>",
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>\n"
    "<|im_user|>user<|im_middle|>multipart<|im_end|><|im_assistant|>assistant<|im_middle|>ok<|im_end|>",
        "<|im_system|>system<|im_middle|>  S  \n"
    "<|im_end|><|im_user|>user<|im_middle|>line1\n"
    "line2<|im_end|><|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>"
    "<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_call_begin|><|tool_call_argument_begin"
    "|>{\"x\": [1, 2]}<|tool_call_end|><|tool_calls_section_end|><|im_end|><|im_system|>tool<|im_middle|>"
    "## Return of \n"
    "r<|im_end|><|im_assistant|>assistant<|im_middle|>",
        "<|im_system|>system<|im_middle|>sys<|im_end|><|im_user|>bob<|im_middle|>look<|media_start|>image<|me"
    "dia_content|><|media_pad|><|media_end|>\n"
    "<|im_end|><|im_assistant|>assistant<|im_middle|>",
    };
    json_object *cases = json_tokener_parse(CASES_KIMI);
    cr_assert(cases);
    for (int i = 0; i < 5; i++) {
        json_object *c = json_object_array_get_idx(cases, (size_t)i), *m, *agp;
        json_object_object_get_ex(c, "messages", &m);
        json_object_object_get_ex(c, "add_generation_prompt", &agp);
        char *out;
        pt_err err = {{0}};
        int rc = pt_chat_render(KIMI, m, json_object_get_boolean(agp), "<s>", "</s>", c, &out, NULL, &err);
        cr_assert_eq(rc, 0, "case %d: %s", i, err.msg);
        cr_expect_str_eq(out, want[i], "case %d", i);
        free(out);
    }
    json_object_put(cases);
}
