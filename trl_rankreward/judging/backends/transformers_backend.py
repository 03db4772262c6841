"""`TransformersBackend`: a chat model run in this process (a small judge on the training GPU).

Requests that arrive together are batched (same sampling settings, up to `max_batch_size`) and generated in one
worker thread, so the event loop stays free; `response_format` is ignored (answers are validated either way).

Only the process that judges runs such a model, so it must be whole there: under ZeRO-3, `from_pretrained` would
partition it, and its first call would wait for processes that never join (a hang on GPUs; gloo aborts with
"Received data size doesn't match expected size"). So `outside_zero3()` hides the DeepSpeed config while it loads,
a partitioned model is refused (`is_partitioned`), and `generate` runs without `synced_gpus`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .base import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, Completion


@dataclass(eq=False)  # compared by identity: equal requests are distinct calls
class _Pending:
    messages: list[dict]
    temperature: float
    max_tokens: int
    future: asyncio.Future


@dataclass
class _LoopQueue:
    pending: list[_Pending] = field(default_factory=list)
    worker: asyncio.Task | None = None


class TransformersBackend:
    """Chat backend that generates with a local causal LM: a loaded model and its tokenizer (with a chat template),
    or a path / Hub id to load both from; `device` defaults to the model's, or cuda when available."""

    def __init__(self, model_or_path, tokenizer=None, *, device=None, max_batch_size: int = 8):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model_or_path, str) or hasattr(model_or_path, "__fspath__"):
            name = str(model_or_path)
            with outside_zero3():
                model = AutoModelForCausalLM.from_pretrained(name)
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(name)
            if device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            model = model_or_path
            if tokenizer is None:
                raise ValueError("TransformersBackend got a model object without a tokenizer; pass tokenizer=")
            if is_partitioned(model):
                raise ValueError(
                    "TransformersBackend got a DeepSpeed ZeRO-3 partitioned model: only the judging process runs it, "
                    "so its weights must be whole there; pass the model's path instead (it is then loaded whole), or "
                    "load it inside trl_rankreward.judging.backends.transformers_backend.outside_zero3()"
                )
        if device is not None:
            model = model.to(device)
        if tokenizer.chat_template is None:
            raise ValueError("The judge tokenizer has no chat template; set tokenizer.chat_template first")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = [*(eos if isinstance(eos, list) else [eos]), tokenizer.eos_token_id]
        self._stop_ids = {i for i in eos if i is not None}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-generate")
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = weakref.WeakKeyDictionary()

    async def complete(
        self,
        messages: list[dict],
        *,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        response_format: dict | None = None,
    ) -> Completion:
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(loop, _LoopQueue())
        item = _Pending(messages, temperature, max_tokens, loop.create_future())
        queue.pending.append(item)
        if queue.worker is None or queue.worker.done():
            queue.worker = loop.create_task(self._drain(queue))
        return await item.future

    async def _drain(self, queue: _LoopQueue) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # let the other coroutines of a gather() enqueue first
        try:
            while queue.pending:
                first = queue.pending[0]
                settings = (first.temperature, first.max_tokens)
                batch = [p for p in queue.pending if (p.temperature, p.max_tokens) == settings][: self.max_batch_size]
                queue.pending = [p for p in queue.pending if p not in batch]
                try:
                    results = await loop.run_in_executor(self._executor, self._generate, batch)
                except Exception as exc:  # hand the error to every waiting caller
                    for p in batch:
                        if not p.future.done():
                            p.future.set_exception(exc)
                    continue
                for p, result in zip(batch, results, strict=True):
                    if not p.future.done():
                        p.future.set_result(result)
        finally:
            queue.worker = None  # a finished task would keep its loop (the weak key) alive

    def _generate(self, batch: list[_Pending]) -> list[Completion]:
        import torch

        prompts = [
            self.tokenizer.apply_chat_template(p.messages, tokenize=False, add_generation_prompt=True) for p in batch
        ]
        self.tokenizer.padding_side = "left"
        inputs = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        inputs = inputs.to(self.model.device)
        temperature = batch[0].temperature
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        with torch.no_grad():
            output = self.model.generate(
                **inputs, max_new_tokens=batch[0].max_tokens, pad_token_id=self._pad_id, synced_gpus=False, **sampling
            )
        generated = output[:, inputs["input_ids"].shape[1] :].tolist()
        prompt_lengths = inputs["attention_mask"].sum(dim=1).tolist()
        completions = []
        for tokens, prompt_tokens in zip(generated, prompt_lengths, strict=True):
            stop = next((i for i, token in enumerate(tokens) if token in self._stop_ids), None)
            # the answer ends before the first stop token; the stop token counts as generated
            answer, used = (tokens, len(tokens)) if stop is None else (tokens[:stop], stop + 1)
            text = self.tokenizer.decode(answer, skip_special_tokens=False)
            completions.append(Completion(text, int(prompt_tokens), used))
        return completions

    def __repr__(self) -> str:
        name = getattr(self.model.config, "_name_or_path", type(self.model).__name__)
        return f"TransformersBackend({name!r}, device={str(self.model.device)!r}, max_batch_size={self.max_batch_size})"


_LOCK = threading.Lock()


@contextlib.contextmanager
def outside_zero3() -> Iterator[None]:
    """Within the block, `from_pretrained` does not partition (transformers sees no ZeRO-3 config); a lock keeps
    two loads from interleaving, since the switch is process-wide."""
    with _LOCK:
        from transformers.integrations import deepspeed as hf_deepspeed

        saved = hf_deepspeed._hf_deepspeed_config_weak_ref  # the one place transformers keeps it
        hf_deepspeed.unset_hf_deepspeed_config()
        try:
            yield
        finally:
            hf_deepspeed._hf_deepspeed_config_weak_ref = saved


def is_partitioned(model) -> bool:
    """True when any of the model's parameters is a ZeRO-3 partition (DeepSpeed tags those with `ds_id`)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())
