//! Built-in chat templates for models whose GGUF files lack `tokenizer.chat_template`.

/// Gemma 3's official template, byte for byte the `chat_template` of google/gemma-3-*-it's
/// tokenizer_config.json (the `'\n\n'` and `'\n'` inside its Jinja string literals are real
/// newlines there too, as the JSON decodes them).
pub(crate) const GEMMA3: &str = concat!(
    "{{ bos_token }}\n",
    "{%- if messages[0]['role'] == 'system' -%}\n",
    "    {%- if messages[0]['content'] is string -%}\n",
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n",
    "    {%- else -%}\n",
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n",
    "    {%- endif -%}\n",
    "    {%- set loop_messages = messages[1:] -%}\n",
    "{%- else -%}\n",
    "    {%- set first_user_prefix = \"\" -%}\n",
    "    {%- set loop_messages = messages -%}\n",
    "{%- endif -%}\n",
    "{%- for message in loop_messages -%}\n",
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n",
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n",
    "    {%- endif -%}\n",
    "    {%- if (message['role'] == 'assistant') -%}\n",
    "        {%- set role = \"model\" -%}\n",
    "    {%- else -%}\n",
    "        {%- set role = message['role'] -%}\n",
    "    {%- endif -%}\n",
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n",
    "    {%- if message['content'] is string -%}\n",
    "        {{ message['content'] | trim }}\n",
    "    {%- elif message['content'] is iterable -%}\n",
    "        {%- for item in message['content'] -%}\n",
    "            {%- if item['type'] == 'image' -%}\n",
    "                {{ '<start_of_image>' }}\n",
    "            {%- elif item['type'] == 'text' -%}\n",
    "                {{ item['text'] | trim }}\n",
    "            {%- endif -%}\n",
    "        {%- endfor -%}\n",
    "    {%- else -%}\n",
    "        {{ raise_exception(\"Invalid content type\") }}\n",
    "    {%- endif -%}\n",
    "    {{ '<end_of_turn>\n' }}\n",
    "{%- endfor -%}\n",
    "{%- if add_generation_prompt -%}\n",
    "    {{'<start_of_turn>model\n'}}\n",
    "{%- endif -%}\n",
);

/// ChatML as llama.cpp writes it when a model has no template of its own
/// (`LLM_CHAT_TEMPLATE_CHATML`): `<|im_start|>{role}\n{content}<|im_end|>\n` per message and
/// `<|im_start|>assistant\n` as the generation prompt.
pub(crate) const CHATML: &str = concat!(
    "{%- for message in messages %}\n",
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n",
    "{%- endfor %}\n",
    "{%- if add_generation_prompt %}\n",
    "{{- '<|im_start|>assistant\\n' }}\n",
    "{%- endif %}\n",
);
