"""Forms, as adapters and the core use them: the model (`bridge.door.forms.model`) and schema building
(`bridge.door.forms.schema`) under one name.

A form comes from an elicitation `requestedSchema` (`form_from_schema`) or is built by the bridge itself
(`approval_form`); every adapter renders the same `Form`, and answers are checked by `bridge.door.forms.checks`.
"""

from __future__ import annotations

from bridge.door.forms.model import STRING_FORMATS, Field, FieldKind, Form, FormErrors, Option, approval_form
from bridge.door.forms.schema import form_from_schema

__all__ = ["STRING_FORMATS", "Field", "FieldKind", "Form", "FormErrors", "Option", "approval_form", "form_from_schema"]
