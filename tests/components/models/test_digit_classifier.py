import pytest
import torch

from components.data.images import load_mnist
from components.models.digit_classifier import DigitClassifier, load_digit_classifier


def test_packaged_mnist_classifier_is_accurate_on_mnist_test():
    images, labels = load_mnist("test")
    images, labels = images[:1000], labels[:1000]
    model = load_digit_classifier("mnist")
    with torch.no_grad():
        accuracy = (model(images).argmax(1) == labels).float().mean().item()
    assert accuracy > 0.97  # the shipped weights reach 98.65 % on 2000 test images
    assert model.features(images[:4]).shape == (4, 128)
    assert not any(p.requires_grad for p in model.parameters())


def test_shape_and_name_errors():
    with pytest.raises(ValueError, match="expected images"):
        DigitClassifier()(torch.zeros(2, 3, 28, 28))
    with pytest.raises(ValueError, match="must be one of"):
        load_digit_classifier("svhn")
